"""The rule catalog: loading rule files, the safe condition language, and the engine that runs them.

The names below are imported on first use (PEP 562): the trace side imports a small module of this
package (``catalog.throughput``), and ``analyze`` forks its workers before loading the catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.catalog.catalog import Catalog, load_catalog
    from gpudoctor.catalog.engine import evaluate

__all__ = ["Catalog", "evaluate", "load_catalog"]


def __getattr__(name: str) -> Any:
    if name in ("Catalog", "load_catalog"):
        from gpudoctor.catalog import catalog

        return getattr(catalog, name)
    if name == "evaluate":
        from gpudoctor.catalog.engine import evaluate

        return evaluate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
