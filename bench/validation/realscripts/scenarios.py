"""The validated third-party training scripts: how each is started, fed and fixed through its own flags.

Why this exists: the validation must run scripts this project did not write, unmodified. What differs
per script — its folder, its command line on the H200 and in the CPU dry-run (``--cpu --tiny``), the
data it reads, how it prints its own speed, and which of gpudoctor's fixes its flags can express — is
data, kept here in one table. A fix is the harness's fix kind (see ``reportread.CODE_FIX_KIND``)
mapped to extra arguments; ``with_args`` replaces a flag the base command already sets
(``--dtype=float32`` → ``--dtype=bfloat16``, ``--model.workers 0`` → ``--model.workers 12``).

Where each script came from (repository and commit): docs/bench-history.md, "Third-party scripts for
validation".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import datagen

HARNESS_DIR = Path(__file__).resolve().parent
COMPILING_KINDS = ("compile", "cuda_graphs")


@dataclass
class Ctx:
    """Where things are and how big to make them for one harness run."""

    scripts: Path          # the folder of fetched third-party scripts (--scripts)
    work: Path             # temporary folder: generated data, reports, logs, script outputs
    cpu: bool              # CPU dry-run: no GPU, tiny sizes
    python: str            # interpreter for the scripts

    @property
    def workers(self) -> int:
        """DataLoader workers the ``workers`` fix asks for: most of the machine's cores."""
        return 2 if self.cpu else max(2, min(12, (os.cpu_count() or 4) - 4))


@dataclass
class Scenario:
    name: str
    part: int
    origin: str                                  # "repo path" (the commit: docs/bench-history.md)
    cwd: Callable[[Ctx], Path]
    base: Callable[[Ctx], list[str]]             # the script and its arguments (after the interpreter)
    fixes: Callable[[Ctx], dict[str, list[str]]]  # fix kind -> extra arguments
    batch: Callable[[Ctx], int]                  # samples per optimizer step (throughput)
    wall: str                                    # reportread.wall_rate format of its progress lines
    chain: int = 4                               # apply up to this many fixes in sequence
    compile_s: float = 60.0                      # GPU: extra --duration for a compiled run (compile time)
    startup_s: float = 0.0                       # GPU: extra --duration for a slow start (imports, first batch)
    prepare: Callable[[Ctx], object] | None = None   # writes the data it reads
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)


def _groups(args: list[str]) -> list[list[str]]:
    """Split arguments into [flag, values…] groups (``--k=v`` is one group; a leading non-flag is its own)."""
    out: list[list[str]] = []
    for a in args:
        is_flag = a.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", a)
        if is_flag or not out or "=" in out[-1][0]:
            out.append([a])
        else:
            out[-1].append(a)
    return out


def _key(group: list[str]) -> str:
    return group[0].split("=", 1)[0] if group[0].startswith("-") else ""


def with_args(base: list[str], extra: list[str]) -> list[str]:
    """``base`` with each flag of ``extra`` replacing the same flag's values there, or appended."""
    groups = _groups(base)
    for g in _groups(extra):
        k = _key(g)
        for i, b in enumerate(groups):
            if k and _key(b) == k:
                groups[i] = g
                break
        else:
            groups.append(g)
    return [a for g in groups for a in g]


# -- data --------------------------------------------------------------------------------------------

def _images(ctx: Ctx) -> Path:
    if ctx.cpu:
        return datagen.image_folder(ctx.work / "imagefolder", classes=4, train_per_class=16,
                                    val_per_class=4, size=96)
    return datagen.image_folder(ctx.work / "imagefolder", classes=20, train_per_class=400,
                                val_per_class=13, size=320)


def _nanogpt_dir(ctx: Ctx) -> Path:
    run = ctx.work / "nanogpt_run"
    data = run / "data" / "synth"
    if not (data / "val.bin").exists():
        n = 200_000 if ctx.cpu else 5_000_000
        datagen.token_bins(data, train_tokens=n, val_tokens=n // 10)
        for name in ("train.py", "model.py", "configurator.py"):   # train.py reads configurator.py from cwd
            link = run / name
            if not link.exists():
                link.symlink_to(ctx.scripts / "nanoGPT" / name)
    return run


def _wikitext(ctx: Ctx) -> Path:
    folder = ctx.work / "wikitext-2"
    if not (folder / "test.txt").exists():
        datagen.wikitext(folder, train_tokens=60_000 if ctx.cpu else 400_000)
    return folder


# -- the scenarios -----------------------------------------------------------------------------------

def _timm_base(ctx: Ctx) -> list[str]:
    if ctx.cpu:
        return ["benchmark.py", "--bench", "train", "--device", "cpu", "--model", "resnet18", "-b", "8",
                "--img-size", "64", "--num-classes", "10", "--num-warm-iter", "2", "--num-bench-iter", "500",
                "--no-retry"]
    return ["benchmark.py", "--bench", "train", "--model", "resnet50", "-b", "256", "--num-warm-iter", "5",
            "--num-bench-iter", "600", "--no-retry"]


def _nanogpt_base(ctx: Ctx) -> list[str]:
    common = ["train.py", "--dataset=synth", "--compile=False", "--dtype=float32", "--max_iters=100000",
              "--lr_decay_iters=100000", "--eval_interval=100000", "--log_interval=5",
              "--always_save_checkpoint=False", "--out_dir=out"]
    if ctx.cpu:
        return common + ["--device=cpu", "--n_layer=2", "--n_head=2", "--n_embd=64", "--block_size=64",
                         "--batch_size=4", "--gradient_accumulation_steps=2", "--eval_iters=1"]
    return common + ["--batch_size=12", "--block_size=1024", "--gradient_accumulation_steps=4",
                     "--eval_iters=2"]


def _hf_base(ctx: Ctx) -> list[str]:
    common = [str(HARNESS_DIR / "hf_trainer_gpt2.py"), "--output_dir", str(ctx.work / "hf_out"),
              "--max_steps", "100000", "--logging_steps", "50", "--save_strategy", "no", "--report_to", "none"]
    if ctx.cpu:
        return common + ["--use_cpu", "True", "--n_layer", "2", "--n_head", "2", "--n_embd", "64",
                         "--seq_len", "64", "--per_device_train_batch_size", "4"]
    return common       # Trainer defaults: batch 8 per device, fp32, eager, no DataLoader workers


def _lightning_base(ctx: Ctx) -> list[str]:
    common = ["imagenet.py", "fit", "--model.data_path", str(ctx.work / "imagefolder"), "--model.workers", "0",
              "--trainer.max_epochs", "1000", "--trainer.limit_val_batches", "2",
              "--trainer.num_sanity_val_steps", "0", "--trainer.default_root_dir", str(ctx.work / "pl_root")]
    if ctx.cpu:
        return common + ["--model.arch", "resnet18", "--model.batch_size", "4", "--trainer.accelerator", "cpu"]
    return common + ["--model.arch", "resnet50", "--model.batch_size", "128"]


def _pt_imagenet_base(ctx: Ctx) -> list[str]:
    if ctx.cpu:
        return ["main.py", "--dummy", "-a", "resnet18", "-b", "4", "-j", "1", "-p", "2"]
    return ["main.py", "--dummy", "-a", "resnet50"]      # defaults: batch 256, 4 workers, DataParallel


def _wlm_base(ctx: Ctx) -> list[str]:
    common = ["main.py", "--accel", "--data", str(ctx.work / "wikitext-2"), "--save", str(ctx.work / "wlm.pt")]
    if ctx.cpu:
        return common + ["--emsize", "32", "--nhid", "32", "--batch_size", "8", "--log-interval", "20"]
    return common


def _torchvision_base(ctx: Ctx) -> list[str]:
    script = str(HARNESS_DIR / "torchvision_resnet50.py")
    if ctx.cpu:
        return [script, "--device", "cpu", "--arch", "resnet18", "--batch", "4", "--image-size", "64",
                "--classes", "10", "--log-every", "10"]
    return [script]                                   # ResNet-50, batch 256, fp32, eager


def _no_fixes(ctx: Ctx) -> dict[str, list[str]]:
    return {}


SCENARIOS: list[Scenario] = [
    Scenario(
        "timm_resnet50", 1, "huggingface/pytorch-image-models benchmark.py --bench train",
        cwd=lambda c: c.scripts / "timm", base=_timm_base,
        fixes=lambda c: {"bf16": ["--amp", "--amp-dtype", "bfloat16"], "channels_last": ["--channels-last"],
                         "compile": ["--torchcompile"],
                         "cuda_graphs": ["--torchcompile", "--torchcompile-mode", "reduce-overhead"]},
        batch=lambda c: 8 if c.cpu else 256, wall="timm_bench", compile_s=75.0, startup_s=20.0,  # cold start ~30 s
        note="the classic sequence: ResNet-50 batch 256, eager fp32, then each fix gpudoctor names"),
    Scenario(
        "torchvision_resnet50", 3, "this repo: bench/validation/realscripts/torchvision_resnet50.py (torchvision model, plain loop)",
        cwd=lambda c: c.work, base=_torchvision_base,
        fixes=lambda c: {"bf16": ["--bf16"], "channels_last": ["--channels-last"], "compile": ["--compile"],
                         "cuda_graphs": ["--compile", "--compile-mode", "reduce-overhead"]},
        batch=lambda c: 4 if c.cpu else 256, wall="hf_trainer", compile_s=75.0,
        note="the classic sequence again on a loop with no per-step sync: ResNet-50 batch 256, data on the GPU"),
    Scenario(
        "lightning_imagenet", 2, "Lightning-AI/pytorch-lightning examples/pytorch/domain_templates/imagenet.py",
        cwd=lambda c: c.scripts / "lightning", base=_lightning_base,
        fixes=lambda c: {"workers": ["--model.workers", str(c.workers)],
                         "bf16": ["--trainer.precision", "bf16-mixed"]},
        batch=lambda c: 4 if c.cpu else 128, wall="tqdm", chain=2, startup_s=45.0,   # no step within 30 s (H200)
        prepare=_images,
        note="LightningCLI, ImageFolder of generated JPEGs decoded in the training process (workers 0)"),
    Scenario(
        "nanogpt_gpt2", 2, "karpathy/nanoGPT train.py",
        cwd=_nanogpt_dir, base=_nanogpt_base,
        fixes=lambda c: {"bf16": ["--dtype=bfloat16"], "compile": ["--compile=True"]},
        batch=lambda c: 8 if c.cpu else 48, wall="nanogpt", chain=3,
        note="GPT-2 small (124M), 12 x 1024 tokens x 4 micro-batches per optimizer step, fp32 eager"),
    Scenario(
        "pt_examples_imagenet", 2, "pytorch/examples imagenet/main.py --dummy",
        cwd=lambda c: c.scripts / "pytorch_examples" / "imagenet", base=_pt_imagenet_base,
        fixes=lambda c: {"workers": ["-j", str(c.workers)]},
        batch=lambda c: 4 if c.cpu else 256, wall="pt_imagenet", chain=1,
        note="defaults (ResNet-50 here, batch 256, 4 workers making FakeData images, DataParallel)"),
    Scenario(
        "pt_examples_wlm", 2, "pytorch/examples word_language_model/main.py",
        cwd=lambda c: c.scripts / "pytorch_examples" / "word_language_model", base=_wlm_base,
        fixes=_no_fixes, batch=lambda c: 8 if c.cpu else 20, wall="wlm", chain=0,
        prepare=_wikitext,
        note="2-layer LSTM, parameters updated by hand (no optimizer): diagnosis only"),
    Scenario(
        "hf_trainer_gpt2", 2, "this repo: bench/validation/realscripts/hf_trainer_gpt2.py (transformers Trainer)",
        cwd=lambda c: c.work, base=_hf_base,
        fixes=lambda c: {"bf16": ["--bf16", "True"], "compile": ["--torch_compile", "True"],
                         "cuda_graphs": ["--torch_compile", "True", "--torch_compile_mode", "reduce-overhead"],
                         "tf32": ["--tf32", "True"], "workers": ["--dataloader_num_workers", str(c.workers)],
                         # the driver's own model flag; in a script with a tokenizer this is
                         # model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)
                         "pad_dims": ["--vocab_size", "50304"]},
        batch=lambda c: 4 if c.cpu else 8, wall="hf_trainer", chain=3,
        note="no unmodified transformers example runs without `datasets`: smallest Trainer driver"),
    Scenario(
        "pt_examples_wlm_optimizer", 2, "pytorch/examples word_language_model/main.py --use-optimizer",
        cwd=lambda c: c.scripts / "pytorch_examples" / "word_language_model",
        base=lambda c: [*_wlm_base(c), "--use-optimizer"],
        fixes=_no_fixes, batch=lambda c: 8 if c.cpu else 20, wall="wlm", chain=0,
        prepare=_wikitext,
        note="the same with its AdamW option: the agent sees optimizer steps"),
]
