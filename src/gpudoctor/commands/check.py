"""``gpudoctor check``: static checks of training code, deploy files and (``--env``) this machine.

Reads files, never runs them and never imports torch. The checkers in :mod:`gpudoctor.static` turn
files into fact sets; :func:`gpudoctor.pipeline.check_paths` has the rule files judge them; inline
``# gpudoctor: ignore[GD###]`` comments then drop findings. Exit 0 (clean), 1 (findings at or above
``--fail-on``), 2 (usage or input error: a path that does not exist, or a file named on the command
line that cannot be analysed — unreadable, not UTF-8, over the size limit, a FIFO or device; the
report still lists it as GD899 and checks the rest).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpudoctor.commands.common import (
    add_rule_arguments,
    exit_status,
    fail_on,
    open_output,
    prepare,
    refuse_overwriting_inputs,
)
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.pipeline import check_paths
from gpudoctor.report.model import Report

FORMATS = ("text", "json", "markdown", "sarif", "github")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="files or directories to check (default: . unless --env alone)")
    parser.add_argument("--env", action="store_true", help="also check this machine: driver vs torch CUDA, "
                        "/dev/shm, NCCL, GPU visibility, ptrace permission")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write the report to this file")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes for large trees (default: CPU count; 1 = no workers)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour text output")
    add_rule_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1.", ExitCode.USAGE)
    config, catalog = prepare(args)
    paths = list(args.paths) or ([] if args.env else ["."])
    from gpudoctor.static.files import classify

    refuse_overwriting_inputs(args.output, paths, lambda path: classify(path) is not None)
    unanalyzable = _named_files_not_analyzable(paths)
    report = check_paths(paths, env=args.env, catalog=catalog, options=config.options, jobs=args.jobs,
                         test_files=None if config.test_files is None else tuple(config.test_files))
    _write(report, args, catalog)
    if unanalyzable:  # the report lists them (GD899); the exit status must not say "all clear"
        shown = "; ".join(f"{path} ({problem})" for path, problem in unanalyzable[:3])
        more = f" and {len(unanalyzable) - 3} more" if len(unanalyzable) > 3 else ""
        raise UserError(f"could not check {shown}{more}.", ExitCode.USAGE)
    return exit_status(report, fail_on(args, config))


def _named_files_not_analyzable(paths: list[str]) -> list[tuple[str, str]]:
    """Files named on the command line that cannot be read, decoded or are not regular files."""
    import os

    from gpudoctor.static.files import named_file_problem

    found = []
    for path in paths:
        if os.path.lexists(path) and not os.path.isdir(path):
            problem = named_file_problem(path)
            if problem:
                found.append((path, problem))
    return found


def _write(report: Report, args: argparse.Namespace, catalog: object) -> None:
    out = open_output(args.output)
    color = {"always": True, "never": False}.get(args.color)
    try:
        if args.format == "sarif":
            from gpudoctor.report.sarif import write_sarif

            write_sarif(report, catalog, out)  # type: ignore[arg-type]
        elif args.format == "github":
            from gpudoctor.report.github import write_github

            write_github(report, out)
        elif args.format == "text":
            from gpudoctor.report.lines import write_lines

            write_lines(report, out, color)
        else:
            from gpudoctor.report import render

            render(report, args.format, out)
    finally:
        if out is not None and args.output is not None:
            out.close()
