"""Helpers shared by subcommands: catalog loading with config, output selection, exit status.

The config, the catalog and the report are imported where they are used, not here: building the
``analyze`` parser imports this module, and ``analyze`` starts its worker processes before it loads
the rules side (which it then does while they read).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.severity import Severity  # not gpudoctor.model: see gpudoctor.severity

if TYPE_CHECKING:
    from gpudoctor.catalog import Catalog
    from gpudoctor.config import Config
    from gpudoctor.report.model import Report


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    """--select/--ignore/--fail-on/--config/--rules-dir, shared by analyze, check and attach."""
    parser.add_argument("--select", action="append", default=[], metavar="CODES",
                        help="only these rule codes or prefixes (comma-separated, repeatable)")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODES",
                        help="skip these rule codes or prefixes (comma-separated, repeatable)")
    parser.add_argument("--fail-on", choices=[s.value for s in Severity], default=None,
                        help="exit 1 when a finding at or above this severity exists (default: warning)")
    parser.add_argument("--config", type=Path, default=None, help="config file (default: nearest "
                        "gpudoctor.toml or pyproject.toml with [tool.gpudoctor])")
    parser.add_argument("--rules-dir", action="append", type=Path, default=[],
                        help="an extra directory of your own GD### rule files")


def add_watch_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--export-dir`` and ``--keep-traces``: where a live watch (``attach``, ``run``) leaves files."""
    parser.add_argument("--export-dir", type=Path, default=None, metavar="DIR",
                        help="where the dashboard's e key writes its Markdown and JSON report "
                             "(default: the current directory; the paths are shown and printed on exit)")
    parser.add_argument("--keep-traces", action="store_true",
                        help="keep the profile traces the agent writes (in /tmp/gpudoctor-<uid> or "
                             "/run/user/<uid>/gpudoctor) once analysed, renamed kept-trace-…; by default they are removed, "
                             "and a watch removes traces a day old that a killed watch left")


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def load_catalog(dirs: Sequence[Path] = ()) -> Catalog:
    """The built-in rules plus ``dirs`` (:func:`gpudoctor.catalog.load_catalog`, imported when first called)."""
    from gpudoctor.catalog import load_catalog as load

    return load(list(dirs))


def prepare(args: argparse.Namespace, listing: bool = False) -> tuple[Config, Catalog]:
    """Load the config and the catalog, applying --select/--ignore over the config's; a run (not
    ``listing`` the rules) keeps GD899 whatever --select says (:data:`~gpudoctor.catalog.catalog.ALWAYS_SELECTED`)."""
    from gpudoctor.catalog.catalog import ALWAYS_SELECTED
    from gpudoctor.catalog.options import resolve_options
    from gpudoctor.catalog.rulefile import RuleFileError
    from gpudoctor.config import load_config

    config = load_config(getattr(args, "config", None))
    try:
        catalog = load_catalog([*config.rule_dirs, *getattr(args, "rules_dir", [])])
    except RuleFileError as exc:
        raise UserError(f"cannot load rules: {exc}", ExitCode.USAGE) from None
    config.options = resolve_options(catalog, config.options)
    select = _split(getattr(args, "select", [])) or config.select
    ignore = [*config.ignore, *_split(getattr(args, "ignore", []))]
    return config, catalog.select(select, ignore, () if listing else ALWAYS_SELECTED)


def fail_on(args: argparse.Namespace, config: Config) -> Severity:
    return Severity.parse(getattr(args, "fail_on", None) or config.fail_on or "warning")


def exit_status(report: Report, threshold: Severity) -> int:
    return int(ExitCode.FINDINGS if report.count_at_or_above(threshold) else ExitCode.OK)


def open_output(path: Path | None) -> TextIO:
    """stdout, or the file ``-o`` names; a failure to write it at any point (``-o /proc/version``: EIO
    on write; a full disk) is one sentence and exit 2 (:class:`_OutputFile`), never a traceback."""
    if path is None:
        return sys.stdout
    try:
        raw = path.open("wb")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}.", ExitCode.USAGE) from None
    return _OutputFile(raw, path)


class _OutputFile(io.TextIOWrapper):
    """The ``-o`` file as UTF-8 text whose write, flush and close errors name the file."""

    def __init__(self, raw: BinaryIO, path: Path) -> None:
        super().__init__(raw, encoding="utf-8")
        self.output_path = path

    def _failed(self, exc: OSError) -> UserError:
        return UserError(f"cannot write {self.output_path}: {exc.strerror or exc}.", ExitCode.USAGE)

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        try:
            super().close()  # closes the file even when the last flush fails
        except OSError as exc:
            raise self._failed(exc) from None


def refuse_overwriting_inputs(output: Path | None, inputs: Sequence[str | Path],
                              reads: Callable[[Path], bool]) -> None:
    """``-o`` must not name a file the command reads: ``analyze x.json -o x.json`` overwrote its trace.

    Refused: the output is an existing file that is one of ``inputs``, or lies under an input
    directory with a name the command reads there (``reads``).

    Raises:
        UserError: the output would overwrite an input (exit 2).
    """
    if output is None or not output.is_file():
        return
    target = os.path.realpath(output)
    for raw in inputs:
        given = Path(raw)
        try:
            same = given.exists() and os.path.samefile(given, output)
        except OSError:
            same = False
        inside = given.is_dir() and target.startswith(os.path.realpath(given).rstrip(os.sep) + os.sep)
        if same or (inside and reads(output)):
            raise UserError(f"-o {output} is one of the files this command reads; write the report to "
                            "another file.", ExitCode.USAGE)
