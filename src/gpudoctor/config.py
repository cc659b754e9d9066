"""User configuration: ``[tool.gpudoctor]`` in pyproject.toml, or ``gpudoctor.toml``.

Looked up from the current directory upwards (the first file that has gpudoctor settings wins);
``--config`` names a file explicitly. See docs/rules-format.md for the keys.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.exitcodes import ExitCode, UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Config:
    rule_dirs: list[Path] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None


def load_config(explicit: Path | None = None, start: Path | None = None) -> Config:
    """Find and read the configuration. A malformed file is a :class:`UserError` (exit 2)."""
    if explicit is not None:
        return _read(explicit, required=True) or Config(path=explicit)
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        for name in ("gpudoctor.toml", "pyproject.toml"):
            cfg = _read(directory / name, required=False)
            if cfg is not None:
                return cfg
    return Config()


def _read(path: Path, required: bool) -> Config | None:
    if not path.is_file():
        if required:
            raise UserError(f"config file {path} does not exist.", ExitCode.USAGE)
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot read config {path}: {exc}.", ExitCode.USAGE) from None
    table = data.get("tool", {}).get("gpudoctor") if path.name == "pyproject.toml" else data
    if path.name == "gpudoctor.toml" and "tool" in data:
        table = data["tool"].get("gpudoctor", data)
    if table is None:
        return None
    base = path.parent
    try:
        return Config(
            rule_dirs=[base / p for p in table.get("rule-dirs", [])],
            select=[str(s) for s in table.get("select", [])],
            ignore=[str(s) for s in table.get("ignore", [])],
            fail_on=table.get("fail-on"),
            options={str(k): dict(v) for k, v in table.get("options", {}).items()},
            path=path,
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"config {path}: [tool.gpudoctor] is malformed ({exc}).", ExitCode.USAGE) from None
