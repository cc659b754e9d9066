"""Writes docs/facts.md from the fact registry: one table per source and scope.

Why this exists: fact names were listed by hand in several documents and drifted from what the
producers emit. The registry (:mod:`gpudoctor.catalog.registry`) is the one declaration; this module
renders it, and ``tests/core/test_registry.py`` fails when the committed page is stale.
Regenerate with::

    .venv/bin/python -m gpudoctor.catalog.registry_docs > docs/facts.md

What it must not do: read anything but the registry (the page must not depend on the machine).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from gpudoctor.catalog.registry import LOCATION_NAMES, REGISTRY, FactSpec
from gpudoctor.model import Source

COMMAND = ".venv/bin/python -m gpudoctor.catalog.registry_docs > docs/facts.md"

#: Sources in the page's order, with what their fact sets describe.
SOURCE_TITLES = {
    Source.TRACE: "`gpudoctor analyze`: torch.profiler (Kineto) traces.",
    Source.LIVE: "`gpudoctor attach` / `run`: NVML, the process tree, /dev/shm, py-spy and the in-process agent.",
    Source.STATIC: "`gpudoctor check`: Python training code and deployment files.",
    Source.ENV: "`gpudoctor check --env`: this machine.",
}

_INTRO = f"""# Fact names

<!-- Generated from src/gpudoctor/catalog/registry.py; do not edit. Regenerate: {COMMAND} -->

Every fact a rule condition, message or impact model may read, by source and scope, as declared in
`src/gpudoctor/catalog/registry.py`. Rule loading refuses a rule that reads a name missing here for
its block's source and scope. Facts of scope `run` are seen by every block of their source; a
`python.*` scope means every Python scope, `*` every scope of the source. Besides facts, a
condition may read its rule's options and the location fields
{", ".join(f"`{n}`" for n in sorted(LOCATION_NAMES))}.

The producer is the module under `gpudoctor` that writes the fact (`agent` means the in-process
agent's stats reply); `tests/core/test_registry.py` checks that it does.

GPU time from a trace comes two ways, and each fact's line says which. A *duration sum* adds the
durations of the kernels *launched* inside the steps (src/gpudoctor/trace/gputime.py: one table per
trace, by kernel class), so two kernels overlapping on two streams count twice and a kernel that
runs after its step ends still counts: `fusible_ms_per_step`, `gpu_kernel_ms_per_step`, the
`gemm_*_pct` shares, `compute_kernel_ms` (every kernel of the trace). A *span union* counts each µs
of the steps' *wall time* once (src/gpudoctor/trace/partition.py), the first kernel class winning
where streams overlap: the `part_*_ms` step parts, `gpu_busy_ms_per_step`. So
`part_gpu_fusible_ms` and `fusible_ms_per_step` differ where streams overlap, where the GPU runs
behind the host (H200 ResNet-18 bf16: 11.6 vs 13.6 ms) and by Optimizer.step's fusible kernels,
which the union holds and the sum leaves out (`torch.compile(model)` does not compile the
optimizer).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def scopes_in_order(specs: Iterable[FactSpec]) -> list[str]:
    """The scopes of ``specs`` in the order the registry first names them, ``run`` (seen by all) last."""
    scopes = list(dict.fromkeys(scope for spec in specs for scope in spec.scopes))
    return sorted(scopes, key=lambda scope: scope == "run")


def markdown(specs: Iterable[FactSpec] = REGISTRY) -> str:
    """docs/facts.md for ``specs``."""
    specs = list(specs)
    lines = [_INTRO]
    for source, title in SOURCE_TITLES.items():
        of_source = [s for s in specs if s.source is source]
        if not of_source:
            continue
        lines.append(f"## {source.value}\n\n{title}\n")
        for scope in scopes_in_order(of_source):
            rows = [s for s in of_source if scope in s.scopes]
            lines.append(f"### `{source.value}` · scope `{scope}` ({len(rows)} fact{'s' if len(rows) != 1 else ''})\n")
            lines.append("| name | unit | producer | doc |")
            lines.append("|---|---|---|---|")
            lines.extend(f"| `{s.name}` | {_cell(s.unit)} | `{s.producer}` | {_cell(s.doc)} |" for s in rows)
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
