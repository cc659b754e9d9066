"""idle / compute / non-compute per rank agree with HTA 0.5.0's numbers (traces/README.md) within 0.5 points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

# (trace, idle %, compute %, non-compute %, kernel_time µs, overlap % or None) from HTA 0.5.0.
HTA_REFERENCE = [
    ("public/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 2.63, 96.75, 0.62, 384_634, None),
    ("public/hta/negative_queue_length_values_check/rank0.json.gz", 69.44, 14.15, 16.41, 1_016_554, 1.37),
    ("public/hta/nccl_parser_config/nccl_data.json.gz", 77.78, 17.26, 4.97, 435_586, 14.31),
    ("public/hta/df_index_resolver/df_index_resolver.json.gz", 46.08, 35.55, 18.37, 1_396_669, 0.0),
    ("public/hta/trace_filter/sampled_rank-0.json.gz", 53.56, 17.71, 28.74, 600_058, 11.81),
    ("public/hta/trace_filter/sampled_rank-1.json.gz", 54.72, 22.57, 22.72, 600_674, 20.05),
    ("public/hta/trace_diff/control/control.json.gz", 16.20, 61.23, 22.57, 383_404, 47.03),
    ("public/hta/trace_diff/test/test.json.gz", 7.47, 68.31, 24.23, 628_371, 68.80),
    ("public/tb_plugin_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
     39.43, 59.35, 1.22, 830_494, None),
    ("public/tb_plugin_resnet50/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
     24.32, 73.23, 2.45, 677_173, None),
]


@pytest.mark.parametrize(("relative", "idle", "compute", "non_compute", "kernel_time_us", "overlap"),
                         HTA_REFERENCE, ids=[r[0].split("/")[-2] + "/" + r[0].split("/")[-1][:14] for r in HTA_REFERENCE])
def test_temporal_breakdown_matches_hta(relative: str, idle: float, compute: float, non_compute: float,
                                        kernel_time_us: int, overlap: float | None,
                                        trace_file: Callable[[str], Path]) -> None:
    values = compute_rank_metrics(load_trace(trace_file(relative))).values
    assert values["idle_pct"] == pytest.approx(idle, abs=0.5)
    assert values["compute_pct"] == pytest.approx(compute, abs=0.5)
    assert values["non_compute_pct"] == pytest.approx(non_compute, abs=0.5)
    assert values["kernel_time_us"] == pytest.approx(kernel_time_us, rel=0.001)
    if overlap is not None:
        assert values["overlap_pct"] == pytest.approx(overlap, abs=0.5)
