"""User configuration: ``[tool.gpudoctor]`` in pyproject.toml, or ``gpudoctor.toml``.

Looked up from the current directory upwards (the first file that has gpudoctor settings wins);
``--config`` names a file explicitly. See docs/rules-format.md for the keys. Files are read through
:mod:`gpudoctor.boundedio` (regular files only, size-capped, nesting and huge integers refused), so a
bad file is one sentence and exit 2; a ``pyproject.toml`` found on the way up that does not parse and
does not mention gpudoctor is skipped, since it is not ours to judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from gpudoctor.boundedio import InputFileError, loads_toml, read_regular_text
from gpudoctor.exitcodes import ExitCode, UserError

#: A configuration file larger than this is refused (pyproject.toml files are a few KiB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024

class Config(msgspec.Struct):
    rule_dirs: list[Path] = msgspec.field(default_factory=list)
    select: list[str] = msgspec.field(default_factory=list)
    ignore: list[str] = msgspec.field(default_factory=list)
    fail_on: str | None = None
    options: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    path: Path | None = None


def load_config(explicit: Path | str | None = None, start: Path | None = None) -> Config:
    """Find and read the configuration. A malformed file is a :class:`UserError` (exit 2)."""
    if explicit is not None:
        explicit = Path(explicit)
        return _read(explicit, required=True) or Config(path=explicit)
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        for name in ("gpudoctor.toml", "pyproject.toml"):
            cfg = _read(directory / name, required=False)
            if cfg is not None:
                return cfg
    return Config()


def _read(path: Path, required: bool) -> Config | None:
    if not required and not path.is_file():
        return None  # the implicit lookup only considers regular files (a FIFO there is not a config)
    try:
        text = read_regular_text(path, MAX_CONFIG_BYTES)
    except InputFileError as exc:
        if required and exc.reason == "unreadable" and not path.exists():
            raise UserError(f"config file {path} does not exist.", ExitCode.USAGE) from None
        raise UserError(f"config {path} {exc}.", ExitCode.USAGE) from None
    if not required and path.name == "pyproject.toml" and "gpudoctor" not in text:
        return None  # cannot hold [tool.gpudoctor]: neither parsed (tomllib is ~3 ms of start-up) nor judged
    try:
        data = loads_toml(text)
    except InputFileError as exc:
        raise UserError(f"config {path} {exc}.", ExitCode.USAGE) from None
    table = _table(data.get("tool"), "gpudoctor") if path.name == "pyproject.toml" else data
    if path.name != "pyproject.toml" and "tool" in data:
        table = _table(data.get("tool"), "gpudoctor") or data
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UserError(f"config {path}: [tool.gpudoctor] must be a table.", ExitCode.USAGE)
    fail_on = table.get("fail-on")
    if fail_on is not None and str(fail_on).strip().lower() not in ("info", "warning", "critical"):
        raise UserError(f"config {path}: fail-on must be info, warning or critical, not {str(fail_on)[:40]!r}.",
                        ExitCode.USAGE)
    base = path.parent
    try:
        return Config(
            rule_dirs=[base / p for p in table.get("rule-dirs", [])],
            select=[str(s) for s in table.get("select", [])],
            ignore=[str(s) for s in table.get("ignore", [])],
            fail_on=None if fail_on is None else str(fail_on),
            options={str(k): dict(v) for k, v in table.get("options", {}).items()},
            path=path,
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"config {path}: [tool.gpudoctor] is malformed ({exc}).", ExitCode.USAGE) from None


def _table(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
