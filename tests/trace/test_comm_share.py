"""Communication share of GPU kernel time agrees with HTA 0.5.0's kernel-type breakdown, per rank.

Reference numbers: HTA 0.5.0 ``get_gpu_kernel_breakdown(include_memory_kernels=True)`` on each
trace alone (``bench/perf/hta_rank_overlap.py`` prints them): COMMUNICATION in any category / all
categories, and the plain "COMMUNICATION" row / all categories, in %.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.trace.comm import comm_share_metrics, kernel_type_time_us
from gpudoctor.trace.reader import load_trace

HTA_REFERENCE = [
    ("public/hta/trace_filter/sampled_rank-0.json.gz", 70.09, 61.64),
    ("public/hta/trace_filter/sampled_rank-1.json.gz", 61.77, 49.19),
    ("public/hta/nccl_parser_config/nccl_data.json.gz", 25.08, 21.30),
    ("public/hta/negative_queue_length_values_check/rank0.json.gz", 43.93, 43.14),
    ("public/hta/trace_diff/control/control.json.gz", 41.24, 21.51),
    ("public/hta/trace_diff/test/test.json.gz", 32.72, 9.26),
]


@pytest.mark.parametrize(("relative", "comm_share", "comm_only"), HTA_REFERENCE,
                         ids=[r[0].split("/")[-1][:20] for r in HTA_REFERENCE])
def test_comm_share_matches_hta(relative: str, comm_share: float, comm_only: float,
                                trace_file: Callable[[str], Path]) -> None:
    values = comm_share_metrics(load_trace(trace_file(relative)).events)
    assert values["comm_kernel_share_pct"] == pytest.approx(comm_share, abs=0.05)
    assert values["comm_only_kernel_share_pct"] == pytest.approx(comm_only, abs=0.05)


def test_categories_partition_the_busy_time(trace_file: Callable[[str], Path]) -> None:
    events = load_trace(trace_file("public/hta/trace_diff/control/control.json.gz")).events
    split = kernel_type_time_us(events)
    assert any(len(k) == 2 for k in split), "this trace overlaps communication with computation"
    assert sum(split.values()) == pytest.approx(comm_share_metrics(events)["kernel_busy_us"], abs=0.1)


def test_no_gpu_kernels_gives_no_share(trace_file: Callable[[str], Path]) -> None:
    assert comm_share_metrics(load_trace(trace_file("public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")).events) == {}
