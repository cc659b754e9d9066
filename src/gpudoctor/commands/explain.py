"""``gpudoctor explain GD###``: one rule's full explanation, options and fix."""

from __future__ import annotations

import argparse
import json
import sys

from gpudoctor.commands.common import prepare
from gpudoctor.exitcodes import ExitCode, UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rule", help="rule code (GD101) or name (low-gpu-utilization)")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    parser.add_argument("--rules-dir", action="append", default=[], help="an extra directory of rule files")


def run(args: argparse.Namespace) -> int:
    _, catalog = prepare(args, listing=True)
    rule = catalog.get(args.rule)
    if rule is None:
        raise UserError(f"no rule {args.rule!r}; `gpudoctor rules` lists them.", ExitCode.USAGE)
    options = "\n".join(f"- `{k}` = {v!r}" for k, v in rule.options.items()) or "(none)"
    head = (f"# {rule.code} {rule.name}\n\n**{rule.title}** — severity {rule.severity.value}, "
            f"sources: {', '.join(s.value for s in rule.sources)}\n\n")
    text = head + rule.explanation + f"\n\n### Current option values\n\n{options}\n"
    if args.format == "json":
        json.dump(rule.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "markdown" or not sys.stdout.isatty():
        sys.stdout.write(text)
    else:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text, code_theme="ansi_dark"))
    return 0
