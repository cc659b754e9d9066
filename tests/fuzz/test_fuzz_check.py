"""Property-based fuzzing of ``gpudoctor check`` in process (issue 15): mutated real files in, one answer out.

Seeds are the repository's real inputs (examples/check, the static golden fixtures, the corpus); each
example mutates one seed (deletions, duplications, byte flips, hostile tokens: heredocs, ARG
substitutions, YAML aliases and tags, deep nesting, NUL and invalid UTF-8) and runs the real CLI
``main`` on it. Properties: the exit code is documented (0, 1 or 2 here; never 70), stderr is at most
one ``gpudoctor:`` line and never a traceback, and one run stays under a wall-time bound. The same for
random TOML as ``--config`` and mutated rule files in ``--rules-dir``. Derandomized, fixed budgets.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudoctor.commands.common as common
from gpudoctor.cli import main

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "static" / "golden"
SEEDS: dict[str, list[Path]] = {
    "train.py": [REPO / "examples" / "check" / "train.py",
                 *sorted(p for p in GOLDEN.glob("*.py"))],
    "Dockerfile": [REPO / "examples" / "check" / "Dockerfile", GOLDEN / "Dockerfile", GOLDEN / "Dockerfile.heredoc"],
    "job.yaml": [REPO / "examples" / "check" / "job.yaml", GOLDEN / "k8s.yaml", GOLDEN / "compose.yaml",
                 REPO / "examples" / "check" / "docker-compose.yml"],
    "launch.sh": [GOLDEN / "launch.sh"],
}
TOKENS = [b"<<EOT\n", b"\nEOT\n", b"<<-EOF\n", b"${TAG}", b"$TAG", b"ARG TAG=latest\n", b"FROM pytorch/pytorch:${T:-x}\n",
          b"&a ", b"*a", b"[" * 300, b"{" * 300, b"(" * 300, b"\x00", b"\xff\xfe", b"\\\n", b"\t", b"\r",
          b"# gpudoctor: ignore[", b"!!python/object/apply:os.system ['true']", b"'''", b'"""', "\u00e9".encode(),
          b"---\n", b"%YAML 1.1\n", b"- ", b": ", b"9" * 5000, b"\n" * 3, b"import torch\n", b"for x in loader:\n",
          b"    loss.backward()\n", b"torch.cuda.synchronize()\n", b"COPY <<A <<B /x\n", b"CMD ", b"ENTRYPOINT [",
          b"docker run --gpus all --shm-size=", b"torchrun --nproc_per_node=8 ", b"nvidia.com/gpu: 99999999999999999999"]
#: CI runs the same examples every time; GPUDOCTOR_FUZZ_RANDOM=1 explores new ones (with a larger
#: GPUDOCTOR_FUZZ_EXAMPLES) when hunting for bugs by hand.
DERANDOMIZE = not os.environ.get("GPUDOCTOR_FUZZ_RANDOM")
CHECK_BUDGET = settings(max_examples=int(os.environ.get("GPUDOCTOR_FUZZ_EXAMPLES", "60")),
                        deadline=None, derandomize=DERANDOMIZE, database=None,
                        suppress_health_check=list(HealthCheck))
SLOW_BUDGET = settings(max_examples=int(os.environ.get("GPUDOCTOR_FUZZ_SLOW_EXAMPLES", "15")),
                       deadline=None, derandomize=DERANDOMIZE, database=None,
                       suppress_health_check=list(HealthCheck))
MAX_RUN_S = 20.0  # wall time of one in-process run; a hang, not a slow machine, gets past this


@pytest.fixture(scope="module", autouse=True)
def _cached_builtin_catalog() -> Iterator[None]:
    """Load the built-in catalog once (0.2 s per load); runs with a --rules-dir load for real."""
    real = common.load_catalog
    cached = functools.lru_cache(maxsize=1)(lambda: real([]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(common, "load_catalog", lambda dirs=(): real(dirs) if list(dirs) else cached())
        yield


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Path]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)).read_bytes())
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "flip"]))
        pos = draw(st.integers(min_value=0, max_value=len(data)))
        if op == "delete":
            del data[pos:pos + draw(st.integers(min_value=1, max_value=200))]
        elif op == "insert":
            data[pos:pos] = draw(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=16)))
        elif op == "duplicate":
            chunk = bytes(data[pos:pos + draw(st.integers(min_value=1, max_value=80))])
            data[pos:pos] = chunk * draw(st.integers(min_value=1, max_value=50))
        elif data:
            data[min(pos, len(data) - 1)] = draw(st.integers(min_value=0, max_value=255))
    return bytes(data)


def run_check(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", "--jobs", "1", "--format", "json", *argv])
    assert time.perf_counter() - started < MAX_RUN_S
    return code, out.getvalue(), err.getvalue()


def assert_one_answer(code: int, err: str, allowed: frozenset[int] = frozenset({0, 1, 2})) -> None:
    assert code in allowed, f"exit {code}: {err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") <= 1 and (not err or err.startswith("gpudoctor: ")), err


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seeds_are_checked_cleanly(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for number, seed in enumerate(SEEDS[name]):
            path = Path(tmp) / str(number) / name
            path.parent.mkdir()
            path.write_bytes(seed.read_bytes())
            code, _, err = run_check(str(path))
            assert code in (0, 1) and err == "", (seed, err)


@CHECK_BUDGET
@given(st.sampled_from(sorted(SEEDS)).flatmap(lambda name: st.tuples(st.just(name), mutated(SEEDS[name]))))
def test_mutated_files_get_one_answer(case: tuple[str, bytes]) -> None:
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        code, _, err = run_check(str(path))
    assert_one_answer(code, err)


TOML_VALUES = st.recursive(
    st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.floats(allow_nan=False),
              st.sampled_from(["warning", "critical", "GD1", "GD101", "rules"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
        ["select", "ignore", "fail-on", "options", "rule-dirs", "GD101", "max_idle_pct", "tool", "gpudoctor"]),
        inner, max_size=4)),
    max_leaves=10)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else "inf"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"


@CHECK_BUDGET
@given(st.dictionaries(st.sampled_from(["select", "ignore", "fail-on", "options", "rule-dirs", "tool"]), TOML_VALUES,
                       max_size=4), st.binary(max_size=40))
def test_random_config_gets_one_answer(table: dict[str, object], noise: bytes) -> None:
    text = "".join(f'"{k}" = {_toml(v)}\n' for k, v in table.items()).encode() + noise
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gpudoctor.toml"
        config.write_bytes(text)
        target = Path(tmp) / "ok.py"
        target.write_text("x = 1\n")
        code, _, err = run_check(str(target), "--config", str(config))
    assert_one_answer(code, err)


RULE_SEEDS = sorted((REPO / "rules").glob("GD*.md"))


@st.composite
def rule_with_a_value_replaced(draw: st.DrawFn) -> bytes:
    """A real rule file with one front-matter value replaced by a random TOML value (severity = 5 …)."""
    lines = draw(st.sampled_from(RULE_SEEDS)).read_text(encoding="utf-8").splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines[1:], start=1) if line.startswith("+++"))
    assignments = [i for i in range(1, end) if " = " in lines[i]]
    for index in draw(st.lists(st.sampled_from(assignments), min_size=1, max_size=3)):
        key = lines[index].split(" = ", 1)[0]
        lines[index] = f"{key} = {_toml(draw(TOML_VALUES))}\n"
    return "".join(lines).encode()


@SLOW_BUDGET
@given(st.one_of(mutated(RULE_SEEDS[:12]), rule_with_a_value_replaced()))
def test_mutated_rule_files_get_one_answer(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "rules"
        rules.mkdir()
        (rules / "GD990-fuzzed.md").write_bytes(data)
        target = Path(tmp) / "ok.py"
        target.write_text("import torch\nfor x in loader:\n    loss.backward()\n")
        code, _, err = run_check(str(target), "--rules-dir", str(rules))
    assert_one_answer(code, err)
