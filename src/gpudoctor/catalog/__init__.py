"""The rule catalog: loading rule files, the safe condition language, and the engine that runs them."""

from gpudoctor.catalog.catalog import Catalog, load_catalog
from gpudoctor.catalog.engine import evaluate

__all__ = ["Catalog", "evaluate", "load_catalog"]
