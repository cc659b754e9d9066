"""User configuration: ``[tool.gpudoctor]`` in pyproject.toml, or ``gpudoctor.toml``.

Looked up from the current directory upwards (the first file that has gpudoctor settings wins);
``--config`` names a file explicitly. See docs/rules-format.md for the keys. Files are read through
:mod:`gpudoctor.boundedio` (regular files only, size-capped, nesting and huge integers refused), so a
bad file is one sentence and exit 2; a ``pyproject.toml`` found on the way up that does not parse and
does not mention gpudoctor is skipped, since it is not ours to judge.

Every key and every value's type is checked here, as ruff's settings deny unknown fields: a misspelt
key, ``select = "GD1"`` (a string, not a list: it used to be split into characters and select every
rule) or ``ignore = [["GD1"]]`` (silently ignored) is one sentence naming the key, and exit 2. Whether
the codes, names and options exist is the catalog's to say (:mod:`gpudoctor.settings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from gpudoctor.boundedio import InputFileError, loads_toml, read_regular_text
from gpudoctor.exitcodes import ExitCode, UserError

#: A configuration file larger than this is refused (pyproject.toml files are a few KiB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: The keys of ``[tool.gpudoctor]`` (docs/rules-format.md, "User configuration").
KEYS = ("rule-dirs", "select", "ignore", "fail-on", "options", "test-files")
#: The types an option's value may have in a config file (TOML's scalars, less dates).
_OPTION_TYPES = (bool, int, float, str)

class Config(msgspec.Struct):
    rule_dirs: list[Path] = msgspec.field(default_factory=list)
    select: list[str] = msgspec.field(default_factory=list)
    ignore: list[str] = msgspec.field(default_factory=list)
    fail_on: str | None = None
    options: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    #: patterns of the files ``check`` judges as tests (None: the built-in list, static.files.DEFAULT_TEST_FILES)
    test_files: list[str] | None = None
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
    unknown = sorted(str(k) for k in table if k not in KEYS)
    if unknown:
        raise UserError(f"config {path}: unknown key {unknown[0][:60]!r} in [tool.gpudoctor] (the keys are "
                        f"{', '.join(KEYS)}).", ExitCode.USAGE)
    fail_on = table.get("fail-on")
    if fail_on is not None and (not isinstance(fail_on, str)
                                or fail_on.strip().lower() not in ("info", "warning", "critical")):
        raise UserError(f"config {path}: fail-on must be info, warning or critical, not {_shown(fail_on)}.",
                        ExitCode.USAGE)
    base = path.parent
    return Config(
        rule_dirs=[base / p for p in _strings(table, "rule-dirs", path)],
        select=_strings(table, "select", path),
        ignore=_strings(table, "ignore", path),
        fail_on=fail_on,
        options=_options(table.get("options", {}), path),
        test_files=_strings(table, "test-files", path) if "test-files" in table else None,
        path=path,
    )


def _strings(table: dict[str, Any], key: str, path: Path) -> list[str]:
    """A list of strings (``select``, ``ignore``, ``rule-dirs``); anything else names the key."""
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        example = {"rule-dirs": '["ci/gpudoctor-rules"]', "test-files": '["tests/*", "test_*.py"]'}.get(
            key, '["GD1", "GD201"]')
        raise UserError(f"config {path}: {key} must be a list of strings, like {key} = {example}, not "
                        f"{_shown(value)}.", ExitCode.USAGE)
    return list(value)


def _options(value: Any, path: Path) -> dict[str, dict[str, Any]]:
    """``[tool.gpudoctor.options.<code or name>]`` tables of option = number, boolean or string."""
    if not isinstance(value, dict):
        raise UserError(f"config {path}: options must be tables of rule options, like "
                        f"[tool.gpudoctor.options.GD102], not {_shown(value)}.", ExitCode.USAGE)
    out: dict[str, dict[str, Any]] = {}
    for rule, options in value.items():
        if not isinstance(options, dict):
            raise UserError(f"config {path}: options.{str(rule)[:60]} must be a table of option = value, not "
                            f"{_shown(options)}.", ExitCode.USAGE)
        for name, option in options.items():
            if not isinstance(option, _OPTION_TYPES):
                raise UserError(f"config {path}: option {str(name)[:60]} of {str(rule)[:60]} must be a number, "
                                f"a boolean or a string, not {_shown(option)}.", ExitCode.USAGE)
        out[str(rule)] = dict(options)
    return out


def _shown(value: Any) -> str:
    """A value as the user wrote it, cut short: ``'GD1'`` (a string), ``[['GD1']]``."""
    text = repr(value)
    kind = type(value).__name__
    kind = {"str": "a string", "list": "a list", "dict": "a table", "int": "an integer", "float": "a number",
            "bool": "a boolean"}.get(kind, kind)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


def _table(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
