"""``gpudoctor analyze <traces...>``: diagnose torch.profiler (Kineto) trace files, one per rank.

Reads ``.json``/``.json.gz`` files or directories of per-rank files, runs the trace rules and prints
the report (text, JSON or Markdown) or opens the trace browser (``--tui``). Exit status: 0 when no
finding is at or above ``--fail-on`` (default warning), 1 when one is, 2 for a bad argument or an
unreadable, truncated or foreign file.

A directory of rank traces is analysed on ``--jobs`` worker processes (default: every core the
process may use), with the same result as one process. This module only wires arguments to
:func:`gpudoctor.pipeline.analyze_paths` and the shared renderers; it must never import torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudoctor.commands.common import add_rule_arguments, exit_status, fail_on, open_output, prepare
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.pipeline import analyze_paths, analyze_traces

__all__ = ["add_arguments", "analyze_paths", "analyze_traces", "run"]


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


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1.", ExitCode.USAGE)
    config, catalog = prepare(args)
    threshold = fail_on(args, config)
    report = analyze_paths(args.paths, catalog, config.options, per_step=args.per_step, jobs=args.jobs)
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
