"""GD609 and GD206 on what costs step time: NCCL per-call logging warns, INFO-level set-up logging
and a plain backward inside an autocast block are info (the corpus's four warnings were these)."""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

from gpudoctor.model import Severity


def _findings(path: Path, code: str) -> list[tuple[int, Severity]]:
    return sorted((f.location.line or 0, f.severity) for f in check_findings([path]) if f.code == code)


def test_nccl_trace_and_per_call_subsystems_warn_info_level_is_info(tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text("export NCCL_DEBUG=INFO\nexport NCCL_DEBUG=TRACE\nexport NCCL_DEBUG_SUBSYS=INIT,COLL\n"
                      "export NCCL_DEBUG_SUBSYS=ALL\nexport NCCL_DEBUG_SUBSYS=INIT,ALLOC\nexport NCCL_DEBUG=WARN\n"
                      "torchrun --nproc_per_node 8 train.py\n")
    assert _findings(script, "GD609") == [(1, Severity.INFO), (2, Severity.WARNING), (3, Severity.WARNING),
                                          (4, Severity.WARNING)]


def test_backward_inside_autocast_is_info_and_outside_is_nothing(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nmodel = torch.nn.Linear(8, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(100):\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        loss = model(torch.randn(8, 8, device='cuda')).sum()\n"
        "        loss.backward()\n"
        "    opt.step()\n"
        "for step in range(100):\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        loss = model(torch.randn(8, 8, device='cuda')).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n")
    assert _findings(script, "GD206") == [(7, Severity.INFO)]
