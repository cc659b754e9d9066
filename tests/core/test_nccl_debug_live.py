"""GD609's live blocks on the job facts the live collector builds from a target's environment: per-call
logging (TRACE, or INFO with the COLL/ALL subsystems) warns, INFO alone is info, WARN is nothing."""

from __future__ import annotations

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import process_values
from gpudoctor.live.samples import ProcessSample
from gpudoctor.model import FactSet, Location, Severity, Source


@pytest.mark.parametrize(("env", "expected"), [
    ({"NCCL_DEBUG": "TRACE"}, Severity.WARNING),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,COLL"}, Severity.WARNING),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}, Severity.WARNING),
    ({"NCCL_DEBUG": "INFO"}, Severity.INFO),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ALLOC"}, Severity.INFO),
    ({"NCCL_DEBUG": "WARN"}, None),
])
def test_gd609_live_severity(env: dict[str, str], expected: Severity | None) -> None:
    proc = ProcessSample(timestamp=0.0, pid=4242, alive=True, cmdline=("python", "train.py"), env=env)
    facts = FactSet(scope="job", source=Source.LIVE, values=process_values(proc), location=Location(pid=4242))
    found = [f.severity for f in evaluate(load_catalog(), [facts], [Source.LIVE]).findings if f.code == "GD609"]
    assert found == ([] if expected is None else [expected])
