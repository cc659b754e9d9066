"""Runs the bad-input corpus (tests/fuzz/corpus/<folder>/) through the real CLI, one subprocess per case.

Each folder has a ``manifest.toml`` that says how its cases are run, so that a new folder (the trace
cases in ``analyze/``) needs no code here::

    command = ["check", "{case}"]        # default argv after `gpudoctor`; placeholders below
    [[case]]
    file = "nonutf8.py.case"             # a file of this folder, copied into a fresh temp dir ...
    as = "nonutf8.py"                    # ... under this name (default: file's name)
    make = "fifo"                        # or made at run time instead: fifo | devzero | unreadable |
                                         #   loop | big (9 MiB of Python) | deep-json (nested 1000 deep)
    what = "a Python file that is not UTF-8"
    exit = 2                             # the documented exit code this case must get
    command = ["rules", "--config", "{case}"]   # optional, overrides the folder's
    cwd = "{casedir}"                    # optional (default: the temp dir)
    stdout = "/dev/full"                 # optional: where stdout goes (default: captured)

Placeholders: ``{case}`` the case's path, ``{casedir}`` the temp dir that holds only the case,
``{folder}`` this corpus folder, ``{repo}`` the repository root.

Used by ``test_corpus.py`` (asserts) and ``make_table.py`` (writes docs/bad-inputs.md).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
#: Exit codes gpudoctor documents (src/gpudoctor/exitcodes.py); 70 is a bug and never acceptable here.
DOCUMENTED_EXITS = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 130})
#: A case that has not ended after this many seconds of wall time is killed (a hang).
HANG_WALL_S = float(os.environ.get("GPUDOCTOR_CORPUS_WALL_S", "30"))


@dataclass
class Case:
    folder: str
    name: str
    what: str
    exit: int
    spec: dict[str, Any]
    command: list[str]

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.name}"


@dataclass
class Outcome:
    case: Case
    argv: list[str]
    code: int | None  # None: killed as hung
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    notes: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        """What the user is told: stderr's line; else a note about what was skipped or failed; else the
        first finding line (``check``) or the summary line with the codes found."""
        if self.stderr.strip():
            return self.stderr.strip().splitlines()[0]
        lines = [line.strip() for line in self.stdout.splitlines() if line.strip()]
        for line in lines:
            if line.startswith("note:") and any(word in line for word in _TELLING):
                return line
        for line in lines:
            if re.match(r"\S+:\d+:\d+: GD\d{3} ", line):
                return line
        codes = ", ".join(dict.fromkeys(re.findall(r"\bGD\d{3}\b", self.stdout)))
        summary = next((line for line in lines if re.match(r"(\d+ finding|No problems)", line)), lines[0] if lines else "")
        return f"{summary} ({codes})" if codes else summary


#: Words of a note that says what was not analysed (shown in preference to the summary).
_TELLING = ("rule error", "not checked", "could not", "malformed", "skipped", "missing", "corrupt", "left out",
            "budget")


def load_cases(corpus: Path = CORPUS) -> list[Case]:
    cases = []
    for manifest in sorted(corpus.glob("*/manifest.toml")):
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
        default = list(data.get("command", []))
        for spec in data.get("case", []):
            name = spec.get("name") or spec.get("as") or spec.get("file") or spec.get("make")
            cases.append(Case(folder=manifest.parent.name, name=str(name), what=str(spec.get("what", "")),
                              exit=int(spec["exit"]), spec=spec, command=list(spec.get("command", default))))
    return cases


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "unreadable":  # a regular file whose read fails with EIO, even for root
        path.symlink_to("/proc/self/mem")
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "big":
        path.write_bytes(b"x = 1\n" * (9 * 1024 * 1024 // 6))
    elif kind == "deep-json":
        path.write_text("[" * 1000 + "]" * 1000)
    else:
        raise ValueError(f"unknown make kind {kind!r}")


def _fill(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


def run_case(case: Case, python: str = sys.executable) -> Outcome:
    """Run one case in a fresh temp dir; peak RSS and CPU time are the command's own (``os.wait4``)."""
    with tempfile.TemporaryDirectory(prefix="gpudoctor-corpus-") as tmp:
        casedir = Path(tmp)
        target = casedir / str(case.spec.get("as") or case.spec.get("name") or case.spec.get("file") or "case")
        if "file" in case.spec:
            shutil.copyfile(CORPUS / case.folder / case.spec["file"], target)
        elif "make" in case.spec:
            _make(case.spec["make"], target)
        values = {"case": str(target), "casedir": str(casedir), "folder": str(CORPUS / case.folder),
                  "repo": str(REPO)}
        argv = [python, "-m", "gpudoctor", *(_fill(a, values) for a in case.command)]
        cwd = _fill(str(case.spec.get("cwd", "{casedir}")), values)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "100", "NO_COLOR": "1"}
        stdout_to = case.spec.get("stdout")
        sink = open(stdout_to, "w") if stdout_to else None  # noqa: SIM115 - closed below
        try:
            return _wait(case, argv, cwd, env, sink)
        finally:
            if sink is not None:
                sink.close()


#: Runs the real command and reports its own peak RSS and CPU time. Linux charges a process's peak RSS
#: with the peak of the memory it replaced at exec — the forking parent's (here: pytest, hundreds of
#: MiB after the fuzz tests). A small launcher in between makes that floor the launcher's ~10 MiB.
_LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def _wait(case: Case, argv: list[str], cwd: str, env: dict[str, str], sink: Any) -> Outcome:
    with tempfile.NamedTemporaryFile(prefix="gpudoctor-corpus-usage-", delete=False) as usage_file:
        usage_path = usage_file.name
    started = time.monotonic()
    proc = subprocess.Popen([argv[0], "-c", _LAUNCHER, usage_path, *argv], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=sink.fileno() if sink else subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(HANG_WALL_S, kill)
    timer.start()
    try:
        out, err = proc.communicate()
    finally:
        timer.cancel()
    wall = time.monotonic() - started
    try:
        rss_kib, cpu_s = Path(usage_path).read_text().split()
    except (OSError, ValueError):  # killed before it could write
        rss_kib, cpu_s = "0", "0"
    finally:
        os.unlink(usage_path)
    return Outcome(case=case, argv=argv, code=None if killed.is_set() else proc.returncode,
                   stdout=(out or b"").decode("utf-8", "replace"), stderr=(err or b"").decode("utf-8", "replace"),
                   wall_s=wall, cpu_s=float(cpu_s), peak_rss_mib=int(rss_kib) / 1024)
