"""The README's claims that a test can check: the ``check examples/check`` excerpt and count, the gpu marker.

A new user runs what the README shows; when a planted problem is added or a message changes, this test
names the line to update instead of letting the README drift (it said 40 findings where there were 39).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_check_examples_excerpt_and_count_are_what_check_prints() -> None:
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "examples/check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120).stdout
    printed = re.search(r"^(\d+) finding", out, re.M)
    assert printed is not None, out
    claimed = re.search(r"excerpt of its (\d+) findings", README)
    assert claimed is not None, "the README no longer gives the count of `check examples/check`"
    assert claimed.group(1) == printed.group(1), f"README says {claimed.group(1)} findings, check prints {printed.group(1)}"
    block = README[claimed.end():].split("```", 2)[1]
    excerpt = [line for line in block.splitlines() if line.strip()]
    assert excerpt
    lines = set(out.splitlines())
    assert [line for line in excerpt if line not in lines] == []


def test_no_test_calls_cuda_without_the_gpu_marker() -> None:
    """The README says no test needs a GPU and that one which would carries the ``gpu`` marker: a test
    module whose own code (not a string it checks) reads ``torch.cuda`` or calls ``.cuda()`` must carry it."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        uses_cuda = any(isinstance(node, ast.Attribute) and node.attr == "cuda"
                        and (isinstance(node.value, ast.Name) and node.value.id == "torch"
                             or isinstance(node.ctx, ast.Load) and _is_call_target(tree, node))
                        for node in ast.walk(tree))
        if uses_cuda and "mark.gpu" not in text:
            offenders.append(path.relative_to(ROOT).as_posix())
    assert offenders == [], offenders


def _is_call_target(tree: ast.AST, attr: ast.Attribute) -> bool:
    return any(isinstance(node, ast.Call) and node.func is attr for node in ast.walk(tree))
