"""``gpudoctor analyze <traces...>``: diagnose torch.profiler (Kineto) trace files, one per rank.

Reads ``.json``/``.json.gz`` files or directories of per-rank files, runs the trace rules and prints
the report (text, JSON or Markdown) or opens the trace browser (``--tui``). Exit status: 0 when no
finding is at or above ``--fail-on`` (default warning), 1 when one is, 2 for a bad argument or an
unreadable, truncated or foreign file.

A directory of rank traces is analysed on ``--jobs`` worker processes (default: every core the
process may use), with the same result as one process. The workers start before the rules side
(config, rule catalog, engine, report) is imported or loaded, which happens in this process while
they read. This module only wires arguments to :func:`gpudoctor.pipeline.analyze_paths` and the
shared renderers; it must never import torch.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor.commands.common import add_rule_arguments
from gpudoctor.exitcodes import ExitCode, UserError

if TYPE_CHECKING:
    from gpudoctor.catalog import Catalog
    from gpudoctor.model import Severity

__all__ = ["add_arguments", "run"]


def __getattr__(name: str) -> Any:
    """``analyze_paths`` / ``analyze_traces``, re-exported for older callers, imported on first use."""
    if name in ("analyze_paths", "analyze_traces"):
        from gpudoctor import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="TRACE",
                        help="trace files (.json, .json.gz) or directories of per-rank trace files")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text",
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write the report here instead of stdout")
    parser.add_argument("--per-step", action="store_true", help="add a per-step table (step time, DataLoader, GPU busy)")
    parser.add_argument("--tui", action="store_true", help="browse the findings in the terminal UI")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes for a directory of rank traces (default: the usable cores; 1 = none)")
    add_rule_arguments(parser)
    parser.set_defaults(_late_logging=True)  # logging is set up while the workers read (see run)


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1.", ExitCode.USAGE)
    # The cyclic collector is paused for the whole command: the reader and the metrics pause it
    # anyway, and the imports, the catalog and the report make objects that are never garbage.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if gc_was_enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    from gpudoctor.commands.common import refuse_overwriting_inputs
    from gpudoctor.pipeline import analyze_paths
    from gpudoctor.trace.reader import looks_like_trace_name

    refuse_overwriting_inputs(args.output, args.paths, lambda path: looks_like_trace_name(path.name) and _holds_trace(path))

    thresholds: list[Severity] = []

    def setup() -> tuple[Catalog, Mapping[str, Mapping[str, Any]]]:
        """Logging, the config, the catalog and the renderer, set up while the workers read the traces."""
        from gpudoctor.commands.common import fail_on, prepare

        getattr(args, "configure_logging", lambda: None)()
        config, catalog = prepare(args)
        thresholds.append(fail_on(args, config))
        if not args.tui:
            importlib.import_module("gpudoctor.report.render")
        return catalog, config.options

    report = analyze_paths(args.paths, per_step=args.per_step, jobs=args.jobs, setup=setup)
    from gpudoctor.commands.common import exit_status, open_output

    threshold = thresholds[0]
    if args.tui:
        if not sys.stdout.isatty():
            print("gpudoctor: stdout is not a terminal; printing the report instead of opening the browser.",
                  file=sys.stderr)
        else:
            try:
                from gpudoctor.tui.app import run_trace_browser
            except ImportError:
                raise UserError("the trace browser (--tui) is not available in this build; "
                                "run without --tui for the text report.", ExitCode.USAGE) from None
            run_trace_browser(report)
            return exit_status(report, threshold)
    from gpudoctor.report import render

    if args.output is None:
        render(report, args.format)
    else:
        with open_output(args.output) as out:
            render(report, args.format, out)
    return exit_status(report, threshold)


def _holds_trace(path: Path) -> bool:
    """A file in an analysed directory that reads like a trace (gzip, or ``traceEvents`` near its start):
    ``-o traces/report.json`` from an earlier run is not one, and may be written again."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or b'"traceEvents"' in head
