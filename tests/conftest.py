"""Shared test helpers: where the real traces live, and how the suite is split over xdist workers.

``./dev test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``; CI's machine has
two cores, and most of the slow tests wait on real training subprocesses rather than burn CPU in
pytest). Each test module is one unit of work, so a module's module-scoped fixture (one running
training job shared by its tests) is started once; modules that share a session-scoped fixture are
one unit together (:data:`SHARED_UNITS`). Units whose tests start real torch training jobs go first
(:data:`FIRST`) so the long ones do not end up alone at the tail of the run. A plain
``python -m pytest`` (no ``-n``) runs everything in one process in collection order, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"

#: Modules that share a session-scoped fixture run on one worker, so the fixture is built once; and
#: modules that must not run beside each other.
SHARED_UNITS = {
    # ddp_runs (tests/ranks/conftest.py): one finished 2-rank DDP run per mode
    "tests/ranks/test_stragglers.py": "ranks-ddp-runs",
    "tests/ranks/test_prometheus.py": "ranks-ddp-runs",
    "tests/ranks/test_rank_report.py": "ranks-ddp-runs",
    # short_profiled_run (tests/ranks/conftest.py): one finished DDP run with its rank traces
    "tests/ranks/test_posthoc_straggler.py": "ranks-profiled-runs",
    "tests/ranks/test_traces.py": "ranks-profiled-runs",
    # not a shared fixture: the two 40 s attaches that need 3 judged straggler windows of a 2-rank job
    # burning both cores stay one after the other rather than squeeze each other's ranks
    "tests/ranks/test_end_to_end.py": "ranks-compute-straggler-attach",
    "tests/ranks/test_spawn_end_to_end.py": "ranks-compute-straggler-attach",
    # the demo test fails on any new input_bound.py process still running after it: the examples
    # tests and the tmux dashboard test start that script too, so they must not run beside it (a
    # CI run flagged the tmux test's job as the demo's)
    "tests/tui/test_tui_demo.py": "runs-input-bound-py",
    "tests/examples/test_examples_run.py": "runs-input-bound-py",
    "tests/tui/test_tui_tmux.py": "runs-input-bound-py",
}
#: Folders whose tests start real training jobs, started first (longest work first balances best).
FIRST = ("tests/ranks/", "tests/agent/", "tests/live/", "tests/examples/", "tests/tui/")


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


def _unit(item: pytest.Item) -> str:
    module = item.nodeid.split("::", 1)[0]
    return SHARED_UNITS.get(module, module)


def _order(item: pytest.Item) -> int:
    module = item.nodeid.split("::", 1)[0]
    return next((i for i, folder in enumerate(FIRST) if module.startswith(folder)), len(FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist (a worker process), mark each test with its unit of work and put the slow folders first."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_unit(item)))
    items.sort(key=_order)  # stable: collection order within each folder
