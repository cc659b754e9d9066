"""GD301's static blocks are graded by how many syncs a step makes (issue 34, item 4): a sync in a loop
nested inside the step is a warning, one read per step is info, a read under ``step % N`` is quiet; a
loop that hands the loss and the optimizer to a wrapper trains."""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

SCRIPT = '''
import torch

def train(model, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        loss = model(x.cuda(), y.cuda())
        {backward}
        print(loss.item())
        for p in model.parameters():
            p.grad.norm().item()
        norms = [p.grad.norm().item() for p in model.parameters()]
        grads = [p.grad for p in model.cpu().parameters()]
        if step % 100 == 0:
            for p in model.parameters():
                p.grad.norm().item()
'''


def _syncs(tmp_path: Path, backward: str) -> dict[int, str]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(backward=backward), encoding="utf-8")
    return {f.location.line or 0: f.severity.value for f in check_findings([script]) if f.code == "GD301"}


def test_a_sync_per_parameter_is_a_warning_one_per_step_info(tmp_path: Path) -> None:
    assert _syncs(tmp_path, "loss.backward()") == {8: "info", 10: "warning", 11: "warning", 12: "info"}


def test_wrappers_that_run_backward_make_a_training_loop(tmp_path: Path) -> None:
    for backward in ("loss_scaler(loss, optimizer, parameters=model.parameters())",
                     "self.backward_step(loss, self.optimizer)", "accelerator.backward(loss)",
                     "fabric.backward(loss)", "model.backward(loss)", "scaler.scale(loss).backward()"):
        assert _syncs(tmp_path, backward) == {8: "info", 10: "warning", 11: "warning", 12: "info"}, backward


def test_a_call_that_only_records_the_loss_is_no_step(tmp_path: Path) -> None:
    for call in ("save_checkpoint(loss, optimizer)", "log_metrics(loss, optimizer)", "optimizer.step()"):
        assert _syncs(tmp_path, call) == {}, call
