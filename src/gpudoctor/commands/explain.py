"""``gpudoctor explain GD###``: one rule's full explanation, options and fix."""

from __future__ import annotations

import argparse
import json
import sys

from gpudoctor.commands.common import prepare
from gpudoctor.exitcodes import ExitCode, UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rule", help="rule code (GD101) or name (low-gpu-utilization)")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text",
                        help="text: rendered for the terminal, at its width (default); markdown: the raw source")
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
    elif args.format == "markdown":
        sys.stdout.write(text)
    else:
        render_markdown(text)
    return 0


def render_markdown(text: str) -> None:
    """Markdown as a terminal shows it: headings, lists and code blocks drawn by rich, paragraphs
    reflowed to the terminal's width (the rule files are wrapped at ~100 columns in the source), plain
    characters without colour when stdout is not a terminal (``COLUMNS`` or 80 wide, then)."""
    import os
    import shutil

    from rich.console import Console
    from rich.markdown import Markdown

    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((80, 24)).columns if tty else int(os.environ.get("COLUMNS") or 80)
    console = Console(width=width, no_color=not tty or bool(os.environ.get("NO_COLOR")), highlight=False,
                      force_terminal=tty or None)
    console.print(Markdown(text, code_theme="ansi_dark"))
