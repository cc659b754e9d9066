"""Child interpreters that never run code from the current directory.

``python -c CODE`` and ``python -m MODULE`` put the current directory (``''``) first on ``sys.path``:
a ``json.py`` or ``torch.py`` there would run in gpudoctor's child instead of the real module. ``-I``
would also drop PYTHONPATH (where a job's torch may live), so every child that gpudoctor starts runs
:data:`PRELUDE` first, which removes that one entry before any other import. It needs only the
built-in ``sys`` and works on every Python version (``-P``/``PYTHONSAFEPATH`` need 3.11).
"""

from __future__ import annotations

import sys

#: Drops the current-directory entry that ``-c``/``-m`` put first on ``sys.path``.
PRELUDE = "import sys\nif sys.path and sys.path[0] in ('', '.'): del sys.path[0]\n"


def python_c(code: str, python: str | None = None) -> list[str]:
    """argv for ``python -c code`` (``python``: another interpreter, else this one) without the cwd."""
    return [python or sys.executable, "-c", PRELUDE + code]


def python_m(module: str, python: str | None = None) -> list[str]:
    """argv for ``python -m module`` without the current directory on ``sys.path``."""
    return python_c(f"import runpy\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n", python)


#: Set in the environment of ``multiprocessing`` spawn workers (their ``-c`` command line is not
#: ours): Python 3.11+ then leaves the current directory off their ``sys.path``.
SAFE_PATH_ENV = {"PYTHONSAFEPATH": "1"}
