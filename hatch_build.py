"""Builds gpudoctor's one C module, ``src/gpudoctor/trace/_kineto.c`` (the fast path of reading traces).

Why this exists: hatchling builds pure-Python wheels; this hook compiles the scanner with the C
compiler Python was built with, against the stable ABI of Python 3.11 (one binary serves 3.11 and
later), and tags the wheel for it. It is optional by design: without a compiler or Python's headers,
on Python 3.10, or with ``GPUDOCTOR_PURE=1``, the wheel stays pure Python and gpudoctor reads traces
through msgspec alone (same tables, about 1.7× the CPU time on big traces: docs/bench-history.md).

The module is written next to its source (ignored by git), so an editable install imports it too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("src/gpudoctor/trace/_kineto.c")
MODULE = SOURCE.with_name("_kineto.abi3.so")


class NativeScanHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("GPUDOCTOR_PURE") or sys.version_info < (3, 11):
            return
        if sys.platform == "win32":
            return  # the compiler call below is for cc-like compilers
        source, module = Path(self.root, SOURCE), Path(self.root, MODULE)
        compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        command = [*compiler, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", sysconfig.get_paths()["include"],
                   str(source), "-o", str(module)]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            self.app.display_warning(f"gpudoctor: the C trace scanner was not built ({exc}; "
                                     f"{detail.decode(errors='replace')[-300:]}); traces are read in Python.")
            module.unlink(missing_ok=True)
            return
        build_data["pure_python"] = False
        build_data["tag"] = f"cp311-abi3-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
        if version != "editable":
            build_data["force_include"][str(module)] = "gpudoctor/trace/_kineto.abi3.so"
