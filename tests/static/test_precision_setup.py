"""Precision set-up that is not autocast (GD201) and loss scaling done by a framework (GD207).

The false alarms these pin, each reduced to its essence: an FSDP2 ``MixedPrecisionPolicy`` in bf16
(pytorch/examples FSDP2), apex ``amp.initialize`` (DeepSpeedExamples' SQuAD baseline), a DeepSpeed
config given ``bf16`` item by item or keyed by a ``dtype`` variable, a checkpoint dict whose
``"optimizer"`` key hid the DeepSpeed JSON beside the script, ``torch.autograd.backward`` inside an
``autograd.Function``'s backward (activation checkpointing) taken for a training loop, and fp16
autocast where ``accelerator.backward(loss)`` or timm's ``loss_scaler(loss, optimizer)`` scales the loss.
"""

from __future__ import annotations

import json
from pathlib import Path

from static_helpers import check_findings

from gpudoctor.model import Severity

# a model sized by its arguments: neither a toy nor known to be large
LOOP = '''
model = Net(args.dim).cuda()
for x, y in loader:
    loss = model(x.cuda()).sum()
    loss.backward()
    optimizer.step()
'''
NET = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.body = nn.Linear(dim, dim)
'''


def _gd201(tmp_path: Path, code: str) -> list[Severity]:
    script = tmp_path / "train.py"
    script.write_text(NET + code + LOOP)
    return [f.severity for f in check_findings([script]) if f.code == "GD201"]


def test_fsdp2_mixed_precision_policy_sets_the_precision(tmp_path: Path) -> None:
    policy = '''
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
fully_shard(Net(args.dim), mp_policy=MixedPrecisionPolicy(param_dtype={dtype}, reduce_dtype=torch.float32))
'''
    assert _gd201(tmp_path, policy.format(dtype="torch.bfloat16")) == []
    assert _gd201(tmp_path, policy.format(dtype="torch.float32")) == [Severity.WARNING]


def test_apex_amp_initialize_sets_the_precision(tmp_path: Path) -> None:
    apex = '''
from apex import amp
model, optimizer = amp.initialize(model, optimizer, opt_level="{level}")
'''
    assert _gd201(tmp_path, apex.format(level="O2")) == []
    assert _gd201(tmp_path, apex.format(level="O0")) == [Severity.WARNING]


def test_deepspeed_config_given_bf16_item_by_item(tmp_path: Path) -> None:
    config = '''
import deepspeed
config = {{"train_micro_batch_size_per_gpu": 8, "zero_optimization": {{"stage": 1}}}}
if args.dtype == "bf16":
    config["bf16"] = {{"enabled": {enabled}}}
model, _, _, _ = deepspeed.initialize(model=Net(args.dim), config=config)
'''
    assert _gd201(tmp_path, config.format(enabled="True")) == []
    assert _gd201(tmp_path, config.format(enabled="False")) == [Severity.WARNING]


def test_deepspeed_config_keyed_by_a_dtype_variable(tmp_path: Path) -> None:
    config = '''
import deepspeed
dtype = args.dtype  # "bf16" or "fp16"
config = {{"train_micro_batch_size_per_gpu": 8, {key}: {{"enabled": True}}}}
model, _, _, _ = deepspeed.initialize(model=Net(args.dim), config=config)
'''
    assert _gd201(tmp_path, config.format(key="dtype")) == []
    assert _gd201(tmp_path, config.format(key='"wandb"')) == [Severity.WARNING]


def test_a_checkpoint_dict_is_no_deepspeed_config(tmp_path: Path) -> None:
    """``{"epoch": …, "optimizer": …}`` made the walker think the script built its DeepSpeed config,
    so the ``ds_fp16_config.json`` beside it went unread."""
    code = '''
import deepspeed
model, optimizer, _, _ = deepspeed.initialize(model=Net(args.dim), args=args)
torch.save({"epoch": 1, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pt")
'''
    (tmp_path / "config").mkdir()
    fp16 = {"train_batch_size": 256, "fp16": {"enabled": True}}
    (tmp_path / "config" / "ds_fp16_config.json").write_text(json.dumps(fp16))
    assert _gd201(tmp_path, code) == []
    fp16["fp16"]["enabled"] = False  # read too: fp32 by choice (info), not "no precision set-up seen"
    (tmp_path / "config" / "ds_fp16_config.json").write_text(json.dumps(fp16))
    assert _gd201(tmp_path, code) == [Severity.INFO]


CHECKPOINT_FUNCTION = '''
import torch


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
        torch.autograd.backward(outputs, grads)
        return (None, *[t.grad for t in inputs])


def {name}(outputs, grads):
    torch.autograd.backward(outputs, grads)


torch.cuda.set_device(0)
'''


def test_backward_of_an_autograd_function_is_no_training_loop(tmp_path: Path) -> None:
    script = tmp_path / "checkpointing.py"
    text = CHECKPOINT_FUNCTION.format(name="backward_outside")
    script.write_text(text)
    plain = text.splitlines().index("def backward_outside(outputs, grads):") + 1
    lines = [f.location.line for f in check_findings([script]) if f.code == "GD201"]
    assert lines == [plain]  # the plain function's backward, not CheckpointFunction.backward's


FP16_LOOP = '''
import torch
{setup}
model = Net(args.dim).cuda()
for x, y in loader:
    with torch.autocast("cuda"):
        loss = model(x).sum()
    {backward}
'''


def _gd207(tmp_path: Path, setup: str, backward: str) -> int:
    script = tmp_path / "train.py"
    script.write_text(FP16_LOOP.format(setup=setup, backward=backward))
    return sum(f.code == "GD207" for f in check_findings([script]))


def test_framework_backward_scales_the_fp16_loss(tmp_path: Path) -> None:
    accelerate = "from accelerate import Accelerator\naccelerator = Accelerator()"
    assert _gd207(tmp_path, accelerate, "accelerator.backward(loss)") == 0
    assert _gd207(tmp_path, "", "loss_scaler(loss, optimizer, parameters=model.parameters())") == 0
    assert _gd207(tmp_path, accelerate, "loss.backward()") == 1
    # a tensor's backward given its gradient is no framework's
    assert _gd207(tmp_path, "", "loss.backward(torch.ones_like(loss))") == 1


def test_accelerator_given_only_logging_kwargs_leaves_precision_to_launch(tmp_path: Path) -> None:
    """Accelerate's Megatron-LM example: ``Accelerator(**accelerator_log_kwargs)``, a dict of logging
    options; ``accelerate launch`` and its config choose the precision, as for ``Accelerator()``."""
    code = '''
from accelerate import Accelerator
accelerator_log_kwargs = {{}}
if args.with_tracking:
    accelerator_log_kwargs["log_with"] = args.report_to
    accelerator_log_kwargs[{key}] = {value}
accelerator = Accelerator(gradient_accumulation_steps=4, **accelerator_log_kwargs)
'''
    assert _gd201(tmp_path, code.format(key='"project_dir"', value="args.output_dir")) == []
    assert _gd201(tmp_path, code.format(key='"mixed_precision"', value='"no"')) == [Severity.WARNING]
    assert _gd201(tmp_path, code.format(key="args.key", value="args.value")) == [Severity.WARNING]


def test_deepspeed_config_that_turns_fp16_off_makes_gd201_info(tmp_path: Path) -> None:
    """DeepSpeedExamples' data-efficiency runs: every ``ds_config*.json`` beside the script says
    ``"fp16": {"enabled": false}``: fp32 by choice, which GD201 still lists, as info."""
    code = '''
import deepspeed
model, optimizer, _, _ = deepspeed.initialize(model=Net(args.dim), args=args)
'''
    (tmp_path / "ds_config.json").write_text(json.dumps({"train_batch_size": 32, "fp16": {"enabled": False}}))
    assert _gd201(tmp_path, code) == [Severity.INFO]
    (tmp_path / "ds_config.json").write_text(json.dumps({"train_batch_size": 32, "zero_optimization": {"stage": 0}}))
    assert _gd201(tmp_path, code) == [Severity.WARNING]  # a config that says nothing of precision
    literal = '''
import deepspeed
config = {{"train_micro_batch_size_per_gpu": 8, "fp16": {{"enabled": {enabled}}}}}
model, _, _, _ = deepspeed.initialize(model=Net(args.dim), config=config)
'''
    (tmp_path / "ds_config.json").unlink()
    assert _gd201(tmp_path, literal.format(enabled="False")) == [Severity.INFO]
    assert _gd201(tmp_path, literal.format(enabled="True")) == []
