"""The fault zoo's catalog: each example, its planted problem, the finding it should cause, its fix.

Why this exists: the README table, the CPU tests (tests/examples/) and the GPU validation
(bench/validation/validate_examples.py) all need the same facts about the examples; keeping them in one
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
        evidence: Where the finding comes from: ``trace`` (analyze a profile), ``live`` (attach),
            ``static`` (check), in order of preference.
        fix: The fix ``--fix`` applies.
        also_ok: Codes that are true on the unfixed run besides the planted one ("expected
            extras"): the validation shows them in their own column, never as false positives
            and never hidden. ``extras_reason`` says why, in one line.
        also_ok_fixed: The same for the ``--fix`` run (usually empty: the fixed job is healthy).
        extras_reason: One line: why each code in ``also_ok``/``also_ok_fixed`` is a true finding.
        fix_kind: ``speed`` (the fix must make steps >= 1.1x faster), ``memory`` or ``robustness``
            (the fix is not about speed; ``why_not_speed`` says what it changes instead); ``none``
            for the healthy baseline.
        why_not_speed: For a non-speed fix: what it changes, and why the step rate stays.
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
    also_ok_fixed: tuple[str, ...] = ()
    extras_reason: str = ""
    fix_kind: str = "speed"
    why_not_speed: str = ""
    cuda_only_fix: bool = False
    cpu_args: tuple[str, ...] = field(default_factory=tuple)
    cpu_expected: tuple[str, ...] | None = ()

    def expected_on(self, cpu: bool) -> tuple[str, ...]:
        return (self.expected if self.cpu_expected is None else self.cpu_expected) if cpu else self.expected

    def allowed(self, fixed: bool) -> tuple[str, ...]:
        """Codes that are expected extras on this variant (shown, not counted as false positives).

        GD403 (eager model, fusible kernels) is true on every example but the healthy one: they run
        eagerly on purpose, so that each shows one planted problem, and torch.compile would help them all.
        """
        extras = self.also_ok_fixed if fixed else self.also_ok
        return extras if self.name == "healthy" or "GD403" in extras else (*extras, "GD403")


FIX_KINDS = ("speed", "memory", "robustness", "none")  # "none": the healthy baseline only
#: A speed fix must make the step at least this much faster (fixed / unfixed step rate).
MIN_SPEEDUP = 1.1

EXAMPLES: tuple[Example, ...] = (
    Example("healthy", "none (baseline)", (), ("trace", "live"), "nothing to fix", fix_kind="none",
            why_not_speed="baseline: nothing to fix, run once"),
    Example("input_bound", "DataLoader decodes in the main process (num_workers=0)", ("GD102",),
            ("trace", "live"), "num_workers, persistent_workers, prefetch, pin_memory",
            also_ok=("GD101", "GD302"), cpu_expected=None,
            extras_reason="unfixed: the GPU idles while the main process decodes (GD101), and batches are "
                          "copied from pageable memory (GD302; pin_memory is part of the same fix)"),
    Example("no_autocast", "fp32 matmuls (TF32 on, no autocast)", ("GD201",), ("trace", "live"),
            "bf16 torch.autocast", also_ok=("GD701",), also_ok_fixed=("GD701",),
            extras_reason="a 4096-wide MLP at full speed holds the H200 at its power cap: GD701 reports the "
                          "power throttling, a true reading of the card"),
    Example("tf32_off", "fp32 matmuls on CUDA cores, TF32 off", ("GD202",), ("trace", "live"),
            "allow_tf32 / set_float32_matmul_precision('high')", also_ok=("GD201",),
            also_ok_fixed=("GD201", "GD701"), cuda_only_fix=True,
            extras_reason="no autocast is part of this problem: GD201 is true before and after (bf16 would be "
                          "~2x faster than TF32); at full tensor-core load the H200 hits its power cap (GD701)"),
    Example("host_sync", ".item() per parameter and per step", ("GD301",), ("trace", "live"),
            "keep loss on device, clip_grad_norm_, log every N steps", also_ok=("GD101",),
            extras_reason="unfixed: the GPU idles during every .item() round trip (GD101 is the symptom)"),
    Example("pageable_memcpy", "H2D copies from pageable memory", ("GD302",), ("trace",),
            "pin_memory() + non_blocking=True", also_ok=("GD101", "GD301"), also_ok_fixed=("GD101",),
            cuda_only_fix=True,
            extras_reason="unfixed: a pageable copy blocks the host until it is done (GD301); the job moves "
                          "50 MB per step into a small conv net, so with or without pinning the GPU runs no "
                          "kernel during the copy (GD101)"),
    Example("graph_breaks", "print and .item() inside a compiled forward", ("GD401",), ("trace", "live"),
            "tensor ops (torch.where) instead of Python branches; no side effects",
            also_ok=("GD301", "GD402", "GD101", "GD303"), also_ok_fixed=("GD101", "GD303"), cpu_expected=None,
            extras_reason="unfixed: the .item() in the forward is a host sync (GD301) and its branch recompiles "
                          "(GD402); a 1024x512 MLP is well under 1 ms of GPU work, so fixed or not the host sets "
                          "the pace (GD101, GD303)"),
    Example("launch_bound", "thousands of tiny kernels (hand-rolled LayerNorm/GELU, small batch)",
            ("GD303",), ("trace",), "fused built-ins + torch.compile(mode='reduce-overhead')",
            also_ok=("GD101",), also_ok_fixed=("GD101",),
            extras_reason="a 32x128 model is tens of microseconds of GPU work per layer: even fused and replayed "
                          "as CUDA graphs the GPU waits part of the step (GD101)"),
    Example("single_tensor_optimizer", "Adam(foreach=False) over ~390 parameter tensors (CUDA; 194 on CPU)",
            ("GD204",), ("trace",), "AdamW(fused=True)", also_ok=("GD101", "GD303"),
            also_ok_fixed=("GD101", "GD303"),
            extras_reason="~290 parameter tensors in a 96-layer, 256-wide model: its forward and backward are "
                          "tiny kernels too, so fixed or not the GPU waits for launches (GD303, GD101); the "
                          "fix removes the optimizer's share of them"),
    Example("channels_last_missing", "conv net under AMP in NCHW", ("GD203",), ("trace",),
            "model and input to channels_last", cuda_only_fix=True),
    Example("cudnn_benchmark_off", "convolutions without the cuDNN autotuner", ("GD208",), ("static",),
            "torch.backends.cudnn.benchmark = True", cuda_only_fix=True, cpu_expected=None,
            fix_kind="robustness",
            why_not_speed="with bf16 channels_last convolutions cuDNN's heuristics already pick the fast "
                          "kernels (H200: 1.00x); the autotuner guards against the shapes where they do not"),
    Example("memory_creep", "losses kept with their graphs", ("GD503",), ("live",),
            "history.append(loss.detach())", fix_kind="memory",
            why_not_speed="the leak costs memory, not time, until it ends in an out-of-memory crash; the fix "
                          "keeps allocated memory flat"),
    Example("memory_pressure", "GPU memory 98% full, variable batch sizes", ("GD501", "GD502"), ("live",),
            "leave headroom + expandable_segments:True", cuda_only_fix=True, fix_kind="memory",
            why_not_speed="the fix removes allocator retries and the risk of OOM; the step time stays "
                          "(H200: 1.00x)"),
    Example("small_shm", "DataLoader workers with a 64 MiB /dev/shm", ("GD103",), ("live",),
            "--shm-size / --ipc=host / emptyDir medium: Memory", also_ok=("GD101", "GD102", "GD104", "GD303"),
            also_ok_fixed=("GD101", "GD102", "GD104", "GD303"), cpu_expected=None, fix_kind="robustness",
            why_not_speed="a 64 MiB /dev/shm crashes workers once batches grow ('No space left on device'); "
                          "at this batch size it only risks that, so the rate stays (H200: 0.91x, noise)",
            extras_reason="the model is deliberately tiny (the loader and /dev/shm are the point): the GPU idles "
                          "(GD101) and waits for launches (GD303), and two workers may lag (GD102, GD104)"),
    Example("ddp_straggler", "one DDP rank gets twice the data", ("GD601",), ("trace",),
            "balanced shards (DistributedSampler)", also_ok=("GD602", "GD301", "GD101"),
            also_ok_fixed=("GD602", "GD301", "GD101"),
            extras_reason="two ranks on one GPU talk over gloo, which copies CUDA gradients through the host "
                          "(GD301, un-overlapped communication GD602) while the GPU waits (GD101)"),
)

BY_NAME = {e.name: e for e in EXAMPLES}
