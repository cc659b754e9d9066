"""The fault zoo's catalog: each example, its planted problem, the finding it should cause, its fix.

Why this exists: the README table, the CPU tests (tests/examples/) and the GPU validation
(bench/gpu/validate_examples.py) all need the same facts about the examples; keeping them in one
place stops the three from drifting apart.

What it must not do: import torch (the validation harness reads it without starting torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Example:
    """One example script.

    Attributes:
        name: Script name without ``.py``.
        problem: The planted problem, in a few words.
        expected: Rule codes gpudoctor should report on the unfixed run.
        also_ok: Codes that may legitimately appear too (not false positives), fixed or not.
        evidence: Where the finding comes from: ``trace`` (analyze a profile), ``live`` (attach),
            ``static`` (check), in order of preference.
        fix: The fix ``--fix`` applies.
        cuda_only_fix: The fix cannot change anything on CPU.
        cpu_args: Extra arguments that keep a CPU run short.
        cpu_expected: Codes expected when the example runs on a CPU (most problems need a GPU to
            exist or to be seen); None means the same as ``expected``.
    """

    name: str
    problem: str
    expected: tuple[str, ...]
    evidence: tuple[str, ...]
    fix: str
    also_ok: tuple[str, ...] = ()
    cuda_only_fix: bool = False
    cpu_args: tuple[str, ...] = field(default_factory=tuple)
    cpu_expected: tuple[str, ...] | None = ()

    def expected_on(self, cpu: bool) -> tuple[str, ...]:
        return (self.expected if self.cpu_expected is None else self.cpu_expected) if cpu else self.expected


EXAMPLES: tuple[Example, ...] = (
    Example("healthy", "none (baseline)", (), ("trace", "live"), "nothing to fix"),
    Example("input_bound", "DataLoader decodes in the main process (num_workers=0)", ("GD102",),
            ("trace", "live"), "num_workers, persistent_workers, prefetch, pin_memory",
            also_ok=("GD101",), cpu_expected=None),
    Example("no_autocast", "fp32 matmuls (TF32 on, no autocast)", ("GD201",), ("trace", "live"),
            "bf16 torch.autocast", cuda_only_fix=False),
    Example("tf32_off", "fp32 matmuls on CUDA cores, TF32 off", ("GD202",), ("trace", "live"),
            "allow_tf32 / set_float32_matmul_precision('high')", also_ok=("GD201",), cuda_only_fix=True),
    Example("host_sync", ".item() per parameter and per step", ("GD301",), ("trace", "live"),
            "keep loss on device, clip_grad_norm_, log every N steps", also_ok=("GD101", "GD303")),
    Example("pageable_memcpy", "H2D copies from pageable memory", ("GD302",), ("trace",),
            "pin_memory() + non_blocking=True", also_ok=("GD101", "GD301"), cuda_only_fix=True),
    Example("graph_breaks", "print and .item() inside a compiled forward", ("GD401",), ("trace", "live"),
            "tensor ops (torch.where) instead of Python branches; no side effects",
            also_ok=("GD301", "GD101", "GD303", "GD402"), cpu_expected=None),  # .item() branches also recompile
    Example("launch_bound", "thousands of tiny kernels (hand-rolled LayerNorm/GELU, small batch)",
            ("GD303",), ("trace",), "fused built-ins + torch.compile", also_ok=("GD101",)),
    Example("single_tensor_optimizer", "Adam(foreach=False) over ~390 parameter tensors (CUDA; 194 on CPU)", ("GD204",),
            ("trace",), "AdamW(fused=True)", also_ok=("GD101", "GD303")),
    Example("channels_last_missing", "conv net under AMP in NCHW", ("GD203",), ("trace",),
            "model and input to channels_last", cuda_only_fix=True),
    Example("cudnn_benchmark_off", "convolutions without the cuDNN autotuner", ("GD208",), ("static",),
            "torch.backends.cudnn.benchmark = True", also_ok=("GD201",), cuda_only_fix=True, cpu_expected=None),
    Example("memory_creep", "losses kept with their graphs", ("GD503",), ("live",),
            "history.append(loss.detach())"),
    Example("memory_pressure", "GPU memory 98% full, variable batch sizes", ("GD501", "GD502"), ("live",),
            "leave headroom + expandable_segments:True", cuda_only_fix=True),
    Example("small_shm", "DataLoader workers with a 64 MiB /dev/shm", ("GD103",), ("live",),
            "--shm-size / --ipc=host / emptyDir medium: Memory", also_ok=("GD102", "GD104"), cpu_expected=None),
    Example("ddp_straggler", "one DDP rank gets twice the data", ("GD601",), ("trace",),
            "balanced shards (DistributedSampler)", also_ok=("GD602", "GD101")),
)

BY_NAME = {e.name: e for e in EXAMPLES}
