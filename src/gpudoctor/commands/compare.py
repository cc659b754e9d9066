"""``gpudoctor compare BEFORE AFTER``: speedup with a noise estimate, findings gone/new, a verdict.

Each side is a recording (``attach --record``), a gpudoctor JSON report with step times, a trace
file, a directory of traces, or comma-joined trace files (one per rank). Exits 1 when AFTER is
slower than BEFORE beyond ``--threshold`` and beyond the noise, so it can gate CI.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpudoctor.compare import compare_sides, load_side, to_report
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.report import FORMATS, render
from gpudoctor.report import to_dict as report_to_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", metavar="BEFORE", help="recording, report JSON, trace file or trace directory")
    parser.add_argument("after", metavar="AFTER", help="the same kind of input, after the change")
    parser.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                        help="step-time change (percent) that counts; a slowdown beyond it exits 1 (default: 5)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--output", "-o", type=Path, default=None, help="write the report here instead of stdout")
    parser.add_argument("--config", type=Path, default=None, help="config file (for trace analysis)")
    parser.add_argument("--rules-dir", action="append", type=Path, default=[],
                        help="an extra directory of your own rule files (for trace analysis)")


def _trace_analyzer(args: argparse.Namespace) -> Any:
    """A function analysing trace files into a report dict, or None when this install has no analyzer."""
    try:
        from gpudoctor.commands.analyze import analyze_paths
    except ImportError:
        return None
    from gpudoctor.commands.common import prepare

    def analyze(paths: Sequence[Path]) -> Mapping[str, Any]:
        config, catalog = prepare(args)
        # per_step: the per-step table carries each step's GPU busy time as well as its host span.
        return report_to_dict(analyze_paths(list(paths), catalog, config.options, per_step=True))

    return analyze


def run(args: argparse.Namespace) -> int:
    if not args.threshold >= 0:
        raise UserError("--threshold must be a percentage of zero or more.", ExitCode.USAGE)
    from gpudoctor.commands.common import refuse_overwriting_inputs

    refuse_overwriting_inputs(args.output, [args.before, args.after], lambda path: path.suffix in (".json", ".gz", ".jsonl"))
    analyzer = _trace_analyzer(args)
    before = load_side(args.before, analyzer)
    after = load_side(args.after, analyzer)
    comparison = compare_sides(before, after, args.threshold)
    report = to_report(comparison)
    if args.output is None:
        render(report, args.format)
    else:
        from gpudoctor.commands.common import open_output

        with open_output(args.output) as out:
            render(report, args.format, out)
    return comparison.exit_code
