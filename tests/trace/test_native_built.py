"""Where the install had a C compiler and Python >= 3.11, the C trace scanner must be there.

The build hook (hatch_build.py) leaves a pure-Python install behind when compiling fails, by design;
this test keeps such a failure from passing unnoticed where it should not happen (CI, this machine).
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from gpudoctor.trace import native


@pytest.mark.skipif(not shutil.which(os.environ.get("CC") or "cc") or sys.version_info < (3, 11)
                    or bool(os.environ.get("GPUDOCTOR_PURE")), reason="nothing to build the scanner with, or it is off")
def test_a_compiler_means_the_scanner_was_built() -> None:
    assert native.available(), "a C compiler is here but gpudoctor.trace._kineto is not: reinstall (pip install -e .)"
