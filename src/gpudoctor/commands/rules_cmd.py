"""``gpudoctor rules``: list the catalog, optionally by source, as a table, JSON or Markdown docs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpudoctor.commands.common import prepare
from gpudoctor.model import Source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=[s.value for s in Source], help="only rules that can use this source")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    parser.add_argument("--select", action="append", default=[], help="codes or prefixes to list")
    parser.add_argument("--ignore", action="append", default=[], help="codes or prefixes to leave out")
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rules-dir", action="append", default=[], help="an extra directory of rule files")


def run(args: argparse.Namespace) -> int:
    _, catalog = prepare(args, listing=True)
    rules = catalog.for_source(Source(args.source)) if args.source else list(catalog)
    if args.format == "json":
        json.dump({"rules": [r.to_dict() for r in rules]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "markdown":
        sys.stdout.write("| code | name | severity | sources | title |\n| --- | --- | --- | --- | --- |\n")
        for r in rules:
            srcs = ", ".join(s.value for s in r.sources)
            sys.stdout.write(f"| {r.code} | `{r.name}` | {r.severity.value} | {srcs} | {r.title} |\n")
    else:
        from rich.console import Console
        from rich.padding import Padding
        from rich.table import Table
        from rich.text import Text

        console = Console(highlight=False)
        if console.width >= 130:
            table = Table(box=None, header_style="bold", pad_edge=False)
            for col in ("code", "name", "severity", "estimate", "sources"):
                table.add_column(col, no_wrap=True)  # codes and names stay whole
            table.add_column("title", overflow="fold", ratio=1)
            for r in rules:
                table.add_row(r.code, r.name, r.severity.value, _estimate(r),
                              ",".join(s.value for s in r.sources), r.title)
            console.print(table)
        else:  # narrow terminal: one line of facts per rule, its title wrapped under the name
            width = max(len(r.name) for r in rules)
            console.print(Text(f"{'code':<6} {'name':<{width}} {'severity':<8} estimate", style="bold"))
            for r in rules:
                console.print(f"{r.code:<6} {r.name:<{width}} {r.severity.value:<8} {_estimate(r)}")
                console.print(Padding(Text(r.title, style="dim"), (0, 0, 0, 7)))
    return 0


def _estimate(rule: Any) -> str:
    """Which side of the step the rule's fix shortens (its severity then follows the estimate), or "–"."""
    sides = {w.impact.side for w in rule.whens if w.impact is not None and w.impact.side != "none"}
    return "/".join(sorted(sides)) if sides else "–"
