"""Helpers shared by subcommands: catalog loading with config, output selection, exit status.

The config, the catalog and the report are imported where they are used, not here: building the
``analyze`` parser imports this module, and ``analyze`` starts its worker processes before it loads
the rules side (which it then does while they read).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

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


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def load_catalog(dirs: Sequence[Path] = ()) -> Catalog:
    """The built-in rules plus ``dirs`` (:func:`gpudoctor.catalog.load_catalog`, imported when first called)."""
    from gpudoctor.catalog import load_catalog as load

    return load(list(dirs))


def prepare(args: argparse.Namespace) -> tuple[Config, Catalog]:
    """Load the config and the catalog, applying --select/--ignore over the config's."""
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
    return config, catalog.select(select, ignore)


def fail_on(args: argparse.Namespace, config: Config) -> Severity:
    return Severity.parse(getattr(args, "fail_on", None) or config.fail_on or "warning")


def exit_status(report: Report, threshold: Severity) -> int:
    return int(ExitCode.FINDINGS if report.count_at_or_above(threshold) else ExitCode.OK)


def open_output(path: Path | None) -> TextIO:
    if path is None:
        return sys.stdout
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}.", ExitCode.USAGE) from None
