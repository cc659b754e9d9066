"""The fact registry: every fact a rule may read, declared once.

Why this exists: a fact's name is the contract between a producer (a collector, the trace
analyzer, a static checker, the in-process agent) and the rules. Declared here — name, where it
exists (source and scopes), unit, producer and a one-line doc — rule loading checks every name a
condition or message uses against it (a typo or a fact nobody emits is an error that names the rule),
``docs/facts.md`` is generated from it, and ``tests/core/test_registry.py`` checks that the producer
named for each fact really emits it.

The table is plain text so that it reads like HTA's attribute table or ruff's code table: one row per
fact and source. ``where`` is ``source:scope[,scope…]``; ``producer`` is a module under
``gpudoctor`` (``agent`` means the agent's stats reply, produced inside the training process).

What it must not do: import anything beyond the model (rule loading, the docs generator and every
producer's tests import it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from gpudoctor.model import Source

#: Units a fact may carry; the name's suffix says it (``_pct``, ``_ms``, ``_mib`` …).
UNITS = ("%", "ms", "us", "s", "MiB", "MB", "MiB/s", "W", "degC", "MHz", "count", "number", "ratio", "bool",
         "text", "list")

#: Location fields every fact set carries; conditions may read them like facts.
LOCATION_NAMES = frozenset({"rank", "step", "pid", "gpu", "path", "line", "col", "label", "start_us", "end_us"})


class FactSpec(msgspec.Struct, frozen=True):
    """One fact as one source produces it."""

    name: str
    source: Source
    scopes: tuple[str, ...]
    unit: str
    producer: str
    doc: str

    @property
    def python_type(self) -> str:
        return {"bool": "bool", "text": "str", "list": "list", "count": "int"}.get(self.unit, "float")


_TABLE = """
# name                                   where                                         unit    producer         doc
# --- trace, one fact set per rank trace (gpudoctor.trace.metrics and friends) ---
trace_events                             trace:rank                                    count   trace.metrics    events kept from the trace file
step_count                               trace:rank                                    count   trace.metrics    ProfilerStep#N annotations in the trace that the metrics use (leading CUDA-graph recording steps left out)
cuda_graph_recording_steps_left_out      trace:rank                                    count   trace.metrics    leading profiled steps that recorded CUDA graphs, left out of the step metrics (0 when fewer than 2 steps would remain)
has_steps                                trace:rank                                    bool    trace.metrics    whether the trace has ProfilerStep#N boundaries
step_time_p50_ms                         trace:rank,straggler                          ms      trace.metrics    median step time over the profiled steps
step_time_max_ms                         trace:rank                                    ms      trace.metrics    longest profiled step
profiled_step_ms                         trace:rank                                    ms      trace.metrics    mean profiled step time (ProfilerStep spans): what the step parts add up to
step_time_ms                             trace:rank                                    ms      trace.bottleneck the step without the profiler: profiled step less the host time Kineto adds (never below the GPU's busy time); what impact estimates start from
gemm_lowp_ms_per_step                    trace:rank                                    ms      trace.bottleneck bf16/fp16 tensor-core GEMM/conv kernel time per step
gemm_lowp_unaligned_ms_per_step          trace:rank                                    ms      trace.bottleneck bf16/fp16 tensor-core GEMM time per step in kernels built for operands aligned to fewer than 8 elements (a dimension not a multiple of 8)
gemm_lowp_unaligned_pct_of_gpu           trace:rank                                    %       trace.bottleneck unaligned 16-bit GEMM time as a share of the GPU's busy time in the steps
kernel_time_us                           trace:rank                                    us      trace.metrics    last GPU event end − first GPU event start (HTA's kernel_time)
idle_pct                                 trace:rank                                    %       trace.metrics    GPU idle share of kernel_time (HTA temporal breakdown)
compute_pct                              trace:rank                                    %       trace.metrics    union of computation kernels as a share of kernel_time (HTA)
non_compute_pct                          trace:rank                                    %       trace.metrics    communication + memory kernels not overlapped by compute (HTA)
memory_pct                               trace:rank                                    %       trace.metrics    memcpy/memset share of kernel_time
comm_pct                                 trace:rank                                    %       trace.metrics    communication kernels as a share of kernel_time
comm_ms_per_step                         trace:rank                                    ms      trace.metrics    communication kernel time per step
overlap_pct                              trace:rank                                    %       trace.metrics    share of communication time overlapped by compute (HTA)
last_step_dropped                        trace:rank                                    bool    trace.metrics    GPU work of the last ProfilerStep left out, as HTA does
compute_kernel_ms                        trace:rank                                    ms      trace.metrics    total computation-kernel time in the trace: a duration sum over every non-communication kernel, inside the steps or not
kernel_count                             trace:rank                                    count   trace.metrics    GPU kernels in the trace
kernels_per_step                         trace:rank                                    number  trace.metrics    kernels launched per step
cuda_graph_launches_per_step             trace:rank                                    number  trace.metrics    CUDA-graph replays (cudaGraphLaunch) per step: torch.compile reduce-overhead / torch.cuda.graphs in use
kernel_p50_us                            trace:rank                                    us      trace.metrics    median kernel duration
small_kernel_pct                         trace:rank                                    %       trace.metrics    share of kernels shorter than 10 µs
launch_delay_p50_us                      trace:rank                                    us      trace.metrics    median delay from cudaLaunchKernel to the kernel's start
host_wait_pct                            trace:rank                                    %       trace.metrics    GPU idle time spent waiting for the host to launch work
kernel_wait_pct                          trace:rank                                    %       trace.metrics    GPU idle time between back-to-back kernels (queue full)
gemm_time_pct                            trace:rank                                    %       trace.metrics    GEMM/conv share of all compute-kernel time
gemm_fp32_simt_pct                       trace:rank                                    %       trace.metrics    share of GEMM/conv time in fp32 on CUDA cores (ffma, simt, winograd)
gemm_tf32_pct                            trace:rank                                    %       trace.metrics    share of GEMM/conv time in TF32 on tensor cores
gemm_lowp_pct                            trace:rank                                    %       trace.metrics    share of GEMM/conv time in bf16/fp16 on tensor cores
gemm_unknown_pct                         trace:rank                                    %       trace.metrics    share of GEMM/conv time whose precision the name does not tell
gemm_ms_per_step                         trace:rank                                    ms      trace.bottleneck GEMM/conv kernel time per step: the span union inside the steps (part_gpu_gemm_conv_ms); the gemm_*/matmul_*/conv_*/attention_* ms facts are duration sums scaled to it
gemm_fp32_simt_ms_per_step               trace:rank                                    ms      trace.bottleneck fp32 CUDA-core GEMM/conv kernel time per step
gemm_tf32_ms_per_step                    trace:rank                                    ms      trace.bottleneck TF32 GEMM/conv kernel time per step
matmul_fp32_simt_ms_per_step             trace:rank                                    ms      trace.bottleneck fp32 CUDA-core matmul (not conv) kernel time per step: what allow_tf32 changes
conv_fp32_simt_ms_per_step               trace:rank                                    ms      trace.bottleneck fp32 CUDA-core convolution kernel time per step: what cudnn.allow_tf32 changes
attention_fp32_simt_ms_per_step          trace:rank                                    ms      trace.bottleneck fp32 fused-attention kernel time per step (fmha_cutlassF_f32…; part of the fp32 matmuls, unchanged by TF32)
matmul_fp32_simt_pct_of_gpu              trace:rank                                    %       trace.bottleneck fp32 CUDA-core matmul kernel time as a share of GPU busy time
fp32_simt_pct_of_gpu                     trace:rank                                    %       trace.bottleneck fp32 CUDA-core GEMM/conv kernel time as a share of GPU busy time
sync_gpu_idle_pct                        trace:rank                                    %       trace.bottleneck GPU idle after host syncs as a share of the step
host_active_ms_per_step                  trace:rank                                    ms      trace.bottleneck host threads running training work per step (union over threads, as profiled)
host_untraced_ms_per_step                trace:rank                                    ms      trace.bottleneck stretches of 1 ms or more per step in which no host thread runs a traced op (the host's own untraced work or waiting)
allocator_ms_per_step                    trace:rank                                    ms      trace.bottleneck host time per step in cudaMalloc/cudaFree
bound_share_pct                          trace:rank                                    %       trace.bottleneck the share of the step the bound takes
part_gpu_busy_ms                         trace:rank                                    ms      trace.bottleneck step part: GPU busy in kernels of no known class (0 in traces, whose kernels all have a class; live/bottleneck.py fills it from NVML)
part_gpu_gemm_conv_ms                    trace:rank                                    ms      trace.bottleneck step part: GPU busy in GEMM/convolution kernels (per step)
part_gpu_fusible_ms                      trace:rank                                    ms      trace.bottleneck step part: GPU busy in fusible memory-bound kernels: a span union inside the steps' wall time, where no communication or GEMM/conv kernel ran, Optimizer.step's kernels included (fusible_ms_per_step is the duration sum)
part_gpu_other_ms                        trace:rank                                    ms      trace.bottleneck step part: GPU busy in other kernels
part_gpu_communication_ms                trace:rank                                    ms      trace.bottleneck step part: GPU busy in communication kernels
part_gpu_memcpy_ms                       trace:rank                                    ms      trace.bottleneck step part: GPU busy in memcpy/memset
part_idle_input_wait_ms                  trace:rank                                    ms      trace.bottleneck step part: GPU idle while the host loads data
part_idle_host_sync_ms                   trace:rank                                    ms      trace.bottleneck step part: GPU idle after host syncs
part_idle_host_launch_ms                 trace:rank                                    ms      trace.bottleneck step part: GPU idle while the host runs Python and launches
k_fp32_to_bf16_low                       trace:rank                                    ratio   catalog.throughput fp32 CUDA-core ÷ bf16 tensor-core GEMM/conv kernel-time ratio for this GPU, low end (catalog/throughput.py)
k_fp32_to_bf16_high                      trace:rank                                    ratio   catalog.throughput the same ratio, high end
k_tf32_to_bf16_low                       trace:rank                                    ratio   catalog.throughput TF32 ÷ bf16 GEMM/conv kernel-time ratio, low end
k_tf32_to_bf16_high                      trace:rank                                    ratio   catalog.throughput the same ratio, high end
k_fp32_to_tf32_low                       trace:rank                                    ratio   catalog.throughput fp32 CUDA-core ÷ TF32 GEMM/conv kernel-time ratio, low end
k_fp32_to_tf32_high                      trace:rank                                    ratio   catalog.throughput the same ratio, high end
k_fp32_matmul_to_bf16_low                trace:rank                                    ratio   catalog.throughput fp32 CUDA-core ÷ bf16 tensor-core matmul (not convolution) kernel-time ratio, low end
k_fp32_matmul_to_bf16_high               trace:rank                                    ratio   catalog.throughput the same ratio, high end
k_fp32_matmul_to_tf32_low                trace:rank                                    ratio   catalog.throughput fp32 CUDA-core ÷ TF32 matmul kernel-time ratio, low end
k_fp32_matmul_to_tf32_high               trace:rank                                    ratio   catalog.throughput the same ratio, high end
k_fp32_attention_to_bf16_low             trace:rank                                    ratio   catalog.throughput fp32 fused attention (memory-efficient SDPA) ÷ bf16 flash attention kernel-time ratio, low end
k_fp32_attention_to_bf16_high            trace:rank                                    ratio   catalog.throughput the same ratio, high end
layout_transform_pct                     trace:rank                                    %       trace.metrics    share of compute-kernel time in layout transforms (nchwToNhwc …)
layout_transform_ms_per_step             trace:rank                                    ms      trace.metrics    layout-transform kernel time per step
max_gpu_gap_ms                           trace:rank                                    ms      trace.gaps       longest gap without GPU work inside the steps
gpu_gaps_over_100ms                      trace:rank                                    count   trace.gaps       gaps of 100 ms or more without GPU work
gpu_gap_total_ms                         trace:rank                                    ms      trace.gaps       total time in gaps of 100 ms or more
gpu_gap_input_ms                         trace:rank                                    ms      trace.gaps       time of those gaps in which the loop waited for its next batch (DataLoader.__next__)
gpu_gap_host_ms                          trace:rank                                    ms      trace.gaps       time of those gaps in which the host ran its own work (the gaps less the input waits)
gpu_gap_host_ops                         trace:rank                                    text    trace.gaps       the outermost host ops in that time, by their time in it, and the time no traced op covers
dataloader_pct                           trace:rank                                    %       trace.steps      DataLoader time as a share of the profiled steps (of the mean step, profiled_step_ms)
dataloader_ms_per_step                   trace:rank                                    ms      trace.steps      DataLoader (enumerate/next) time per step on the host
host_syncs_per_step                      trace:rank                                    number  trace.steps      calls per step that make the host wait for the GPU (.item(), synchronize, DtoH)
host_sync_kinds                          trace:rank                                    text    trace.steps      which sync calls were seen
host_sync_ms_per_step                    trace:rank                                    ms      trace.steps      time per step the host is blocked in those calls
host_sync_pct                            trace:rank                                    %       trace.steps      host-blocked time as a share of the step
copy_syncs_per_step                      trace:rank                                    number  trace.steps      synchronous device-to-host copies per step
dtoh_copies_per_step                     trace:rank                                    number  trace.steps      device-to-host memcpys per step
h2d_copies_per_step                      trace:rank                                    number  trace.steps      host-to-device memcpys per step
pageable_h2d_per_step                    trace:rank                                    number  trace.steps      host-to-device copies per step from pageable (unpinned) memory
pageable_h2d_mb_per_step                 trace:rank                                    MB      trace.steps      bytes per step copied from pageable memory
pageable_h2d_ms_per_step                 trace:rank                                    ms      trace.steps      GPU time per step of pageable host-to-device copies
optimizer_ms_per_step                    trace:rank                                    ms      trace.steps      GPU time per step of kernels launched inside Optimizer.step
optimizer_kernels_per_step               trace:rank                                    number  trace.steps      kernels per step launched inside Optimizer.step
optimizer_multi_tensor_kernels_per_step  trace:rank                                    number  trace.steps      multi-tensor-apply (foreach/fused) optimizer kernels per step
attention_time_basis                     trace:rank                                    text    trace.attention  what the attention times count: GPU kernels, or host ops in a trace without kernels
attention_handwritten_chains_per_step    trace:rank                                    number  trace.attention  hand-written attention chains (bmm, scale/mask, softmax, bmm) per step in forward
attention_handwritten_backward_chains_per_step trace:rank                              number  trace.attention  their backward chains (bmm pair, softmax backward, bmm pair) per step
attention_handwritten_ms_per_step        trace:rank                                    ms      trace.attention  time per step of the hand-written attention chains, forward and backward
attention_handwritten_pct_of_step        trace:rank                                    %       trace.attention  hand-written attention time as a share of the profiled step
attention_handwritten_matmul_ms_per_step trace:rank                                    ms      trace.attention  of that time, the matmuls' (GEMM kernels; host bmm ops in a trace without kernels)
attention_handwritten_other_ms_per_step  trace:rank                                    ms      trace.attention  of that time, the rest: scale, mask, softmax, dropout, copies (memory-bound, S x S scores)
attention_matmul_precision               trace:rank                                    text    trace.attention  precision class of those matmul kernels (lowp, tf32, fp32_simt, unknown; host without kernels)
sdpa_calls_per_step                      trace:rank                                    number  trace.attention  scaled_dot_product_attention backend ops per step (forward)
sdpa_backend                             trace:rank                                    text    trace.attention  the SDPA backend with most time: flash, efficient, cudnn, fused or math
sdpa_backends                            trace:rank                                    text    trace.attention  every SDPA backend seen with its time per step
sdpa_math_ms_per_step                    trace:rank                                    ms      trace.attention  time per step of SDPA's math fallback, forward and backward
sdpa_math_pct_of_step                    trace:rank                                    %       trace.attention  SDPA math-fallback time as a share of the profiled step
compiled_frames                          trace:rank                                    count   trace.steps      distinct compiled regions seen
compiled_graphs_per_step                 trace:rank                                    number  trace.steps      compiled graphs run per step
compiled_fx_graph_calls_per_step         trace:rank                                    number  trace.steps      CompiledFxGraph calls per step
compiled_calls_per_step                  trace:rank                                    number  trace.steps      outer calls of compiled functions per step (regions not nested in another region)
compiled_graphs_per_call                 trace:rank                                    number  trace.steps      compiled graphs per call of a compiled function (largest mean over the functions); above 1 = graph breaks
graph_break_windows_per_step             trace:rank                                    number  trace.graphbreaks windows per step between consecutive graphs of one compiled call (forward, and the backward pass of a call with several graphs)
graph_break_backward_windows_per_step    trace:rank                                    number  trace.graphbreaks of graph_break_windows_per_step, those between backward graphs
graph_break_host_ms_per_step             trace:rank                                    ms      trace.graphbreaks host time per step in those windows (guards, resume frames, the eager code of the breaks)
graph_break_gpu_idle_ms_per_step         trace:rank                                    ms      trace.graphbreaks GPU idle per step in those windows, mapped onto GPU time (last kernel of graph k to first of graph k+1), idle after a host sync left to GD301
graph_break_gpu_idle_pct                 trace:rank                                    %       trace.graphbreaks graph_break_gpu_idle_ms_per_step as a share of the profiled step
graph_break_eager_kernels_per_step       trace:rank                                    number  trace.graphbreaks kernels per step launched eagerly in those windows (work the broken graph could not fuse)
graph_break_eager_kernel_ms_per_step     trace:rank                                    ms      trace.graphbreaks GPU time per step of those eager kernels
compiled_region_present                  trace:rank                                    bool    trace.fusion     anything in the trace ran compiled code (Torch-Compiled Region, CompiledFxGraph, triton_ kernels)
gpu_kernel_ms_per_step                   trace:rank                                    ms      trace.fusion     GPU kernel/memcpy/memset time per step launched inside the steps, communication kernels left out: a duration sum (gpu_busy_ms_per_step is the span union)
fusible_ms_per_step                      trace:rank                                    ms      trace.fusion     eager memory-bound kernels torch.compile could fuse (elementwise, norm, reduction, softmax, copy/cast), outside Optimizer.step, per step: a duration sum of the kernels launched in the steps (two overlapping kernels count twice; part_gpu_fusible_ms is the span union)
fusible_pct_of_gpu                       trace:rank                                    %       trace.fusion     fusible_ms_per_step as a share of gpu_kernel_ms_per_step
fusible_kernels_per_step                 trace:rank                                    number  trace.fusion     fusible kernels per step
fusible_norm_ms_per_step                 trace:rank                                    ms      trace.fusion     batch/layer/group/RMS-norm kernels per step (ATen and cuDNN)
fusible_elementwise_ms_per_step          trace:rank                                    ms      trace.fusion     pointwise and activation kernels per step
fusible_reduce_ms_per_step               trace:rank                                    ms      trace.fusion     reduction, loss and softmax kernels per step
fusible_copy_ms_per_step                 trace:rank                                    ms      trace.fusion     copy and dtype-cast kernels per step
compiled_kernel_pct_of_gpu               trace:rank                                    %       trace.fusion     Inductor (triton_) kernels as a share of GPU kernel time
compiled_kernel_ms_per_step              trace:rank                                    ms      trace.fusion     Inductor (Triton) kernel time per step
cast_ms_per_step                         trace:rank                                    ms      trace.fusion     dtype-cast kernels per step (fp32 to bf16/fp16 and back)
autocast_cast_ms_per_step                trace:rank                                    ms      trace.fusion     cast kernels per step launched inside an autocast-eligible op or autograd's ToCopyBackward
autocast_cast_kernels_per_step           trace:rank                                    number  trace.fusion     autocast cast kernels per step
autocast_grad_cast_kernels_per_step      trace:rank                                    number  trace.fusion     the autocast cast kernels per step launched in autograd's ToCopyBackward (gradients cast back to fp32: the weights are trainable)
autocast_cast_pct_of_gpu                 trace:rank                                    %       trace.fusion     autocast cast kernel time as a share of GPU kernel time
launch_gap_ms_per_step                   trace:rank                                    ms      trace.fusion     GPU idle per step between kernels while the next launch had not happened (gaps up to 1 ms)
launch_gaps_per_step                     trace:rank                                    number  trace.fusion     such gaps per step
kernel_sequence_static                   trace:rank                                    bool    trace.fusion     every profiled step launched the same kernel names in the same order
kernel_sequence_match_pct                trace:rank                                    %       trace.fusion     share of steps whose kernel sequence is the most common one
compiles_in_steps                        trace:rank                                    count   trace.steps      compilations that happened inside the profiled steps
compile_ms_in_steps                      trace:rank                                    ms      trace.steps      time spent compiling inside the profiled steps
recompiled_frames                        trace:rank                                    count   trace.steps      compiled regions compiled more than once
outside_collective_ms_p50                trace:rank                                    ms      trace.metrics    median per-step time outside collective waits
collective_wait_ms_p50                   trace:rank                                    ms      trace.metrics    median per-step time blocked in collectives on the host
mem_peak_mib                             trace:rank                                    MiB     trace.metrics    peak allocated CUDA memory (memory profiling events)
mem_peak_used_mib                        trace:rank                                    MiB     trace.metrics    peak allocated memory seen in the trace
mem_reserved_peak_mib                    trace:rank                                    MiB     trace.metrics    peak reserved (cached) memory
mem_total_mib                            trace:rank                                    MiB     trace.metrics    the GPU's memory from deviceProperties
mem_peak_pct                             trace:rank                                    %       trace.metrics    peak reserved memory as a share of the GPU's memory
gpu_busy_ms_per_step                     trace:rank                                    ms      trace.bottleneck union of GPU kernel/memcpy/memset spans per step, inside the steps' wall time (gpu_kernel_ms_per_step is the duration sum)
host_floor_ms                            trace:rank                                    ms      trace.bottleneck the step if the GPU were infinitely fast: step − time the host waits for the GPU
sync_gpu_idle_ms_per_step                trace:rank                                    ms      trace.bottleneck GPU idle per step after host syncs until the next kernel starts (at most 1 ms each, or the sync's wait)
input_gpu_idle_ms_per_step               trace:rank                                    ms      trace.bottleneck GPU idle per step while the host loads the next batch
gpu_idle_ms_per_step                     trace:rank                                    ms      trace.bottleneck GPU idle time per step
gpu_paced_steps                          trace:rank                                    bool    trace.bottleneck the step picture follows each step's kernels on the GPU, not its host span: the kernels the steps launched ran far behind them (a GPU-bound loop that had queued ahead; present only then)
gpu_behind_host_ms                       trace:rank                                    ms      trace.bottleneck with gpu_paced_steps: how long after the last profiled step's host span its last kernel ended
bound                                    trace:rank                                    text    trace.bottleneck what bounds the step: gpu-compute, input, host-overhead, communication, memory
# --- trace, whole trace set ---
rank_count                               trace:run,straggler                           count   trace.facts      rank traces analysed together
device_name                              trace:run                                     text    trace.facts      GPU names from deviceProperties
world_size                               trace:run                                     count   trace.facts      world size from distributedInfo
gpu_arch_major                           trace:run                                     count   trace.facts      compute capability major of the GPU (9 = Hopper)
trace_schema                             trace:run                                     text    trace.facts      trace schema versions seen
median_step_time_p50_ms                  trace:run,straggler                           ms      trace.facts      median over ranks of the median step time
loader_workers_usable                    trace:run                                     count   live.facts       a watched job's usable workers, given to its profile window's analysis (absent for a trace alone)
loader_scaling_max                       trace:run                                     ratio   live.facts       a watched job's input scaling bound, given to its profile window's analysis (absent for a trace alone)
loader_bound_text                        trace:run                                     text    trace.facts      the workers' bound in words: empty for a trace alone, a watched job's (live.facts) for its profile window
# --- trace, one fact set per rank compared with the others (two or more ranks) ---
straggler_score                          trace:straggler                               number  trace.facts      median time outside collectives of the faster ranks ÷ this rank's (< 0.75: straggler)
step_time_score                          trace:straggler                               number  trace.facts      resiliency-ext's step-time ratio (median step ÷ this rank's)
score_basis                              trace:straggler                               text    trace.facts      which time the score compares
straggler_cause                          trace:straggler                               text    trace.facts      likely cause: input, gpu, cpu or compute
cause_detail                             trace:straggler                               text    trace.facts      the evidence behind the cause
straggler_ms                             trace:straggler                               ms      trace.facts      how much longer this rank's own work takes per step
reference_ms                             trace:straggler                               ms      trace.facts      the faster ranks' time the score compares with
reference_outside_ms                     trace:straggler                               ms      trace.facts      the faster ranks' median time outside collectives
outside_collective_ms                    trace:straggler                               ms      trace.facts      this rank's median time outside collectives
collective_wait_ms                       trace:straggler                               ms      trace.facts      this rank's median time blocked in collectives
dominant_collective                      trace:straggler                               text    trace.facts      the collective kernel compared across ranks (HTA)
late_collective_count                    trace:straggler                               count   trace.facts      times this rank started the dominant collective last
late_collective_pct                      trace:straggler                               %       trace.facts      share of collectives this rank started last (HTA's straggler view)
collectives_compared                     trace:straggler                               count   trace.facts      collectives compared across ranks
slower_step_count                        trace:straggler                               count   trace.facts      steps in which this rank was slower than the reference
slower_step_pct                          trace:straggler                               %       trace.facts      share of steps in which this rank was slower
steps_compared                           trace:straggler                               count   trace.facts      steps compared across ranks
# --- live, one fact set per GPU the target uses (gpudoctor.live.facts from NVML) ---
gpu_util_pct                             live:gpu,job,rank                             %       live.facts       NVML utilization, mean over the window
loop_paused                              live:gpu                                      bool    live.facts       no step in this window of a loop that stepped before (compiling, evaluating, exiting), or none yet in a process under 180 s old (starting): idle then is no step cost
profile_window_recent                    live:gpu                                      bool    live.facts       gpudoctor's profile window (or its export) ran in this window: the profiler leaves the GPU idle, NVML utilization then is not the job's
mem_used_mib                             live:gpu                                      MiB     live.facts       memory used on the GPU (NVML)
mem_total_mib                            live:gpu                                      MiB     live.facts       the GPU's memory (NVML)
mem_used_pct                             live:gpu                                      %       live.facts       memory used as a share of the GPU's
power_w                                  live:gpu                                      W       live.facts       power draw
power_limit_w                            live:gpu                                      W       live.facts       enforced power limit
temperature_c                            live:gpu                                      degC    live.facts       GPU temperature
sm_clock_mhz                             live:gpu                                      MHz     live.facts       current SM clock
sm_clock_max_mhz                         live:gpu                                      MHz     live.facts       maximum SM clock
throttle_reasons                         live:gpu                                      list    live.facts       active clock-event (throttle) reasons
throttle_reason_text                     live:gpu                                      text    live.facts       the same, as text
throttle_hw                              live:gpu                                      bool    live.facts       hardware slowdown, thermal or power brake active
throttle_power                           live:gpu                                      bool    live.facts       software power cap active
pcie_gen                                 live:gpu                                      count   live.facts       current PCIe generation
pcie_gen_max                             live:gpu                                      count   live.facts       maximum PCIe generation
pcie_width                               live:gpu                                      count   live.facts       current PCIe link width
pcie_width_max                           live:gpu                                      count   live.facts       maximum PCIe link width
pcie_degraded                            live:gpu                                      bool    live.facts       link below its maximum generation or width
pcie_tx_mib_s                            live:gpu                                      MiB/s   live.facts       PCIe transmit throughput
pcie_rx_mib_s                            live:gpu                                      MiB/s   live.facts       PCIe receive throughput
ecc_uncorrected_volatile                 live:gpu                                      count   live.facts       uncorrected ECC errors since the driver loaded
retired_pages                            live:gpu                                      count   live.facts       retired memory pages
remapped_rows_pending                    live:gpu                                      bool    live.facts       row remapping pending (needs a GPU reset)
target_sm_util_pct                       live:gpu                                      %       live.facts       the target's own SM utilization (per-process NVML)
target_mem_used_mib                      live:gpu                                      MiB     live.facts       memory the target uses on this GPU
other_process_count                      live:gpu                                      count   live.facts       other processes using this GPU
other_pids_text                          live:gpu                                      text    live.facts       their PIDs
device_name                              live:gpu                                      text    live.facts       GPU name
gpm_sm_util_pct                          live:gpu                                      %       live.facts       GPM SM activity (Hopper and later)
gpm_sm_occupancy_pct                     live:gpu                                      %       live.facts       GPM SM occupancy
gpm_tensor_util_pct                      live:gpu,job                                  %       live.facts       GPM tensor-core activity (job: mean over the target's GPUs)
gpm_dram_bw_util_pct                     live:gpu                                      %       live.facts       GPM DRAM bandwidth utilization
gpm_fp32_util_pct                        live:gpu                                      %       live.facts       GPM FP32 pipe utilization
gpm_fp16_util_pct                        live:gpu                                      %       live.facts       GPM FP16 pipe utilization
# --- live, the watched process: process tree, /dev/shm, py-spy ---
process_alive                            live:job                                      bool    live.facts       the target still runs
process_cpu_pct                          live:job                                      %       live.facts       the target's CPU use (100 = one core)
process_rss_mib                          live:job                                      MiB     live.facts       the target's resident memory
process_threads                          live:job                                      count   live.facts       threads in the target
worker_count                             live:job                                      count   live.facts       DataLoader worker processes
worker_busy_count                        live:job                                      count   live.facts       workers using at least half a core
worker_cpu_mean_pct                      live:job                                      %       live.facts       mean CPU use per worker
worker_cpu_min_pct                       live:job                                      %       live.facts       least busy worker's CPU use
cpu_count_allowed                        live:job                                      number  live.facts       CPUs the target may use (affinity ∩ cgroup quota)
local_world_size                         live:job                                      count   live.facts       LOCAL_WORLD_SIZE of the target (ranks on this machine), when set
loader_workers_usable                    live:job                                      count   live.facts       workers the CPUs allow: CPUs per local rank less 2, at most 16 (16 when loading waits on storage, using < 50% CPU)
loader_scaling_max                       live:job                                      ratio   live.facts       usable ÷ producing workers (the agent's num_workers, else the busy worker processes): how many times faster more workers could make the input at best
loader_bound_text                        live:job                                      text    live.facts       the workers' bound in words, for GD102's basis
omp_num_threads                          live:job                                      count   live.facts       OMP_NUM_THREADS of the target
intraop_threads                          live:job                                      count   live.facts       torch's intra-op pool size (OMP_NUM_THREADS or the machine's cores)
loop_compute_threads                     live:job                                      count   live.facts       the training process's busy threads: its intra-op pool when sized beyond the allowed CPUs, else the cores it uses
compute_threads                          live:job                                      count   live.facts       the loop's compute threads + busy workers
compute_threads_per_cpu                  live:job                                      number  live.facts       compute threads per allowed CPU
python_version                           live:job                                      text    live.facts       the target's Python version
nccl_env                                 live:job                                      list    live.facts       NCCL_* variables of the target
nccl_debug                               live:job                                      text    live.facts       NCCL_DEBUG of the target
nccl_debug_subsys                        live:job                                      text    live.facts       NCCL_DEBUG_SUBSYS of the target
nccl_transports_disabled                 live:job                                      list    live.facts       NCCL variables that switch a fast transport off
nccl_transports_disabled_text            live:job                                      text    live.facts       the same, as text
cuda_launch_blocking                     live:job                                      bool    live.facts       CUDA_LAUNCH_BLOCKING set
pytorch_cuda_alloc_conf                  live:job                                      text    live.facts       PYTORCH_CUDA_ALLOC_CONF of the target
torch_env_debug_vars                     live:job                                      list    live.facts       torch debug variables set in the target
shm_total_mib                            live:job                                      MiB     live.facts       size of the target's /dev/shm
shm_free_mib                             live:job                                      MiB     live.facts       free space in /dev/shm
shm_free_pct                             live:job                                      %       live.facts       free share of /dev/shm
shm_used_pct                             live:job                                      %       live.facts       used share of /dev/shm
shm_segments                             live:job                                      count   live.facts       torch shared-memory segments the job holds
shm_segments_mib                         live:job                                      MiB     live.facts       their size
shm_error_seen                           live:job                                      bool    live.facts       a bus error / no space on /dev/shm was seen
shm_error_text                           live:job                                      text    live.facts       the error seen
shm_needed_mib                           live:job                                      MiB     live.facts       workers × prefetch_factor × batch size (agent-measured)
stack_samples                            live:job                                      count   live.facts       py-spy samples of the main thread in the window
stack_data_loading_pct                   live:job                                      %       live.facts       main-thread samples in data loading
stack_forward_pct                        live:job                                      %       live.facts       main-thread samples in forward
stack_backward_pct                       live:job                                      %       live.facts       main-thread samples in backward
stack_optimizer_pct                      live:job                                      %       live.facts       main-thread samples in the optimizer step
stack_host_sync_pct                      live:job                                      %       live.facts       main-thread samples blocked in host syncs (.item(), .cpu(), synchronize)
stack_checkpoint_pct                     live:job                                      %       live.facts       main-thread samples saving checkpoints
stack_logging_pct                        live:job                                      %       live.facts       main-thread samples logging
stack_gpudoctor_agent_pct                live:job                                      %       live.facts       main-thread samples in gpudoctor's own agent
stack_other_pct                          live:job                                      %       live.facts       main-thread samples elsewhere
stack_top_frame                          live:job                                      text    live.facts       most frequent leaf frame
stack_top_frame_pct                      live:job                                      %       live.facts       its share of the samples
# --- live, from the in-process agent ---
steps_total                              live:job                                      count   agent            steps seen since the agent started
window_steps                             live:job                                      count   agent            steps in the last window
step_time_p50_ms                         live:job,rank                                 ms      agent            median step time in the window
step_time_p90_ms                         live:job                                      ms      agent            90th-percentile step time
steps_per_s                              live:job                                      number  agent            step rate
data_wait_pct                            live:job,rank                                 %       agent            share of the step spent waiting for the next batch
data_wait_p50_ms                         live:job                                      ms      agent            median wait for the next batch
h2d_ms_per_step                          live:job                                      ms      agent            host-to-device copy time per step
host_syncs_per_step                      live:job                                      number  agent            host syncs per step counted by the agent
host_sync_ms_per_step                    live:job                                      ms      agent            host time per step blocked in those syncs (sampled steps)
h2d_mib_per_step                         live:job                                      MiB     agent            host-to-device bytes copied per step (sampled steps, CUDA only)
h2d_pinned_pct                           live:job                                      %       agent            share of those bytes copied from pinned memory
step_source                              live:job                                      text    agent            what marks a step: explicit, optimizer, backward or none
graph_breaks                             live:job                                      count   agent            torch.compile graph breaks (dynamo counters)
graph_break_reasons                      live:job                                      list    live.facts       graph-break reasons with user file:line
graph_break_top_reason                   live:job                                      text    live.facts       the most frequent reason
recompiles                               live:job                                      count   agent            torch.compile recompilations
recompiles_in_window                     live:job                                      count   agent            torch.compile recompilations inside the stats window
unique_graphs                            live:job                                      count   agent            compiled graphs
autocast_enabled                         live:job                                      bool    agent            autocast active in the training steps
autocast_dtype                           live:job                                      text    agent            autocast dtype
tf32_matmul                              live:job                                      bool    agent            torch.backends.cuda.matmul.allow_tf32
tf32_cudnn                               live:job                                      bool    agent            torch.backends.cudnn.allow_tf32
cudnn_benchmark                          live:job                                      bool    agent            torch.backends.cudnn.benchmark
cuda_mem_allocated_mib                   live:job                                      MiB     agent            CUDA memory allocated by tensors
cuda_mem_reserved_mib                    live:job                                      MiB     agent            CUDA memory reserved by the caching allocator
cuda_mem_peak_mib                        live:job                                      MiB     agent            peak allocated CUDA memory
cuda_mem_total_mib                       live:job                                      MiB     agent            the device's memory as torch sees it
cuda_alloc_retries                       live:job                                      count   agent            allocator retries (cache flushes)
cuda_ooms                                live:job                                      count   agent            out-of-memory errors caught by the allocator
mem_allocated_trend_mib_per_100_steps    live:job                                      number  agent            growth of allocated memory per 100 steps
loader_batch_mib                         live:job                                      MiB     agent            one batch as the DataLoader returns it
loader_workers                           live:job                                      count   agent            the DataLoader's num_workers
loader_prefetch_factor                   live:job                                      count   agent            the DataLoader's prefetch_factor
loader_worker_starts                     live:job                                      count   agent            times the DataLoader's workers were started in the window (every iter() without persistent_workers)
loader_start_ms_per_step                 live:job                                      ms      agent            starting and stopping them per step: fork, the first batch's wait beyond the median, the shutdown at the epoch's end
loader_start_fork_ms_per_step            live:job                                      ms      agent            of it, forking the workers (the iterator's __init__)
data_wait_restart_ms_per_step            live:job                                      ms      agent            of the data wait per step: the first batch after the workers were forked again and the old ones' shutdown, beyond the steady median wait (GD106)
data_wait_first_ms_per_step              live:job                                      ms      agent            of it: the next batches of an epoch while the workers refill their queues, beyond that median
data_wait_main_ms_per_step               live:job                                      ms      agent            of it: batches loaded in the training process (num_workers=0; GD102)
data_wait_steady_ms_per_step             live:job                                      ms      agent            of it: the rest, workers producing slower than the loop consumes (GD102)
loader_steady_steps                      live:job                                      count   agent            steps of the window whose batch came from workers in steady state
loader_steady_step_ms                    live:job                                      ms      agent            their mean step time
loader_steady_wait_ms                    live:job                                      ms      agent            their mean data wait
loader_main_steps                        live:job                                      count   agent            steps of the window whose batch was loaded in the training process
loader_main_step_ms                      live:job                                      ms      agent            their mean step time
loader_main_wait_ms                      live:job                                      ms      agent            their mean data wait: one step's batches loaded there
loader_dataset                           live:job                                      text    agent            the loop's dataset: Class.__getitem__ (file:line)
loader_made_at                           live:job                                      text    agent            the user's file:line that built the loop's DataLoader (gpudoctor run)
loader_storage_bound                     live:job                                      bool    live.facts       loading hardly uses CPU (no worker busy, or the loop that loads under half a core): it waits on storage
input_wait_fixable_ms_per_step           live:job                                      ms      live.facts       the data wait more workers remove: loading in the loop plus workers slower than the loop
input_wait_fixable_pct                   live:job                                      %       live.facts       that wait as a share of the step
input_wait_cause                         live:job                                      text    live.facts       that wait's cause in words
input_wait_basis                         live:job                                      text    live.facts       GD102's estimate in words: batch time, the loop's own work, the workers the CPUs allow
input_batch_ms                           live:job                                      ms      live.facts       time to produce one step's batches: the loop's wait when it loads, workers x the steady step when they keep it waiting
input_workers_low                        live:job                                      count   live.facts       workers the low estimate counts: the cores the loop leaves free
input_saved_ms_low                       live:job                                      ms      live.facts       step time more workers save, low end
input_saved_ms_high                      live:job                                      ms      live.facts       step time more workers save, high end
input_extra_fork_ms_per_step             live:job                                      ms      live.facts       the low end's extra forks per step of that many workers started again every epoch
cuda_in_use                              live:job                                      bool    live.facts       the target uses CUDA
unaligned_weight_count                   live:job                                      count   live.facts       the step optimizer's 2-D weights with a dimension >= 1000 not a multiple of 8
unaligned_weight_shapes_text             live:job                                      text    live.facts       their shapes, e.g. 50257x768
model_compiled                           live:job                                      bool    live.facts       torch.compile has made at least one graph in the target
cuda_mem_peak_pct                        live:job                                      %       live.facts       peak allocated as a share of the device's memory
cuda_mem_reserved_pct                    live:job                                      %       live.facts       reserved as a share of the device's memory
cuda_mem_fragmentation_pct               live:job                                      %       live.facts       reserved but not allocated, as a share of reserved
step_time_ms                             live:job                                      ms      live.facts       the agent's mean step time (its median without a rate): what live impact estimates start from
gpu_busy_ms_per_step                     live:job                                      ms      live.facts       NVML utilization × step time
# --- live, whole session ---
session_s                                live:run                                      s       live.facts       seconds since the session started
gpu_count                                live:run                                      count   live.facts       GPUs the target uses
rank                                     live:run                                      count   live.facts       the target's RANK
local_rank                               live:run                                      count   live.facts       the target's LOCAL_RANK
world_size                               live:run                                      count   live.facts       the target's WORLD_SIZE
# --- live, one fact set per local rank of a multi-rank job (gpudoctor.live.stragglers) ---
straggler_score                          live:rank                                     number  live.stragglers  median time outside collectives of the faster ranks ÷ this rank's
score_basis                              live:rank                                     text    live.stragglers  how the time outside collectives was obtained
straggler_cause                          live:rank                                     text    live.stragglers  likely cause: input, gpu, cpu or compute
cause_detail                             live:rank                                     text    live.stragglers  the evidence behind the cause
slow_windows                             live:rank                                     count   live.stragglers  consecutive windows this rank was slow
outside_collective_ms                    live:rank                                     ms      live.stragglers  this rank's time outside collective waits per step
reference_outside_ms                     live:rank                                     ms      live.stragglers  the faster ranks' time outside collectives
rank_count                               live:rank,ranks                               count   live.stragglers  local ranks watched
rank_step_time_ms                        live:rank                                     ms      live.stragglers  this rank's mean step time
rank_data_wait_ms                        live:rank                                     ms      live.stragglers  this rank's mean data wait per step
rank_compute_ms                          live:rank                                     ms      live.stragglers  this rank's mean time computing per step
rank_collective_wait_ms                  live:rank                                     ms      live.stragglers  this rank's mean collective wait per step
rank_steps_total                         live:rank                                     count   live.stragglers  steps this rank has done
collective_wait_pct                      live:rank                                     %       live.stragglers  this rank's collective wait as a share of its step
peer_collective_wait_ms                  live:rank                                     ms      live.stragglers  the other ranks' mean collective wait per step
peer_collective_wait_pct                 live:rank                                     %       live.stragglers  the other ranks' collective wait as a share of their step
waited_on                                live:rank                                     bool    live.stragglers  the others wait for this rank (≥ 15% of their step, ≥ 4× its own wait)
# --- live, all local ranks together ---
steps_by_rank                            live:ranks                                    text    live.stragglers  step count of each rank
min_steps_total                          live:ranks                                    count   live.stragglers  fewest steps of any rank
max_steps_total                          live:ranks                                    count   live.stragglers  most steps of any rank
step_spread                              live:ranks                                    count   live.stragglers  max − min step count
ranks_with_steps                         live:ranks                                    count   live.stragglers  ranks whose step count could be read
stalled_s                                live:ranks                                    s       live.stragglers  seconds since any rank made a step
recent_step_time_s                       live:ranks                                    s       live.stragglers  the last step time the ranks reported
lagging_ranks                            live:ranks                                    text    live.stragglers  the ranks behind
dead_ranks                               live:ranks                                    text    live.stragglers  ranks that exited
dead_rank_count                          live:ranks                                    count   live.stragglers  how many ranks exited
where_by_rank                            live:ranks                                    text    live.stragglers  where each rank's main thread is (py-spy), after a stall
# --- static: Python training code (gpudoctor.static.python) ---
file_kind                                static:*                                      text    static.sites     python, dockerfile, compose, k8s, shell, requirements
file_uses_cuda                           static:python.*                               bool    static.python    the file itself moves work to CUDA (.cuda(), .to("cuda"/device), device=…, torch.device("cuda"))
file_uses_ddp                            static:python.whole_dataset_load,python.dataloader bool    static.pyextra   the file itself uses DistributedDataParallel or init_process_group
file_has_distributed_sampler             static:python.whole_dataset_load,python.dataloader bool    static.pyextra   the file itself mentions DistributedSampler
file_is_entry_point                      static:python.whole_dataset_load,python.dataloader bool    static.pyextra   the file runs on its own: an if __name__ == "__main__" block or its own training loop
num_workers                              static:python.dataloader                      count   static.pyextra   DataLoader num_workers (-1 = not a literal)
pin_memory                               static:python.dataloader                      text    static.pyextra   true / false / unset / dynamic
persistent_workers                       static:python.dataloader                      text    static.pyextra   true / false / unset / dynamic
sampler_given                            static:python.dataloader                      bool    static.pyextra   a sampler argument is passed
dataset_in_memory                        static:python.dataloader                      bool    static.python    its dataset is a TensorDataset, a dataset tokenized up front, or a class (of the file, or imported by name from a project module) whose __getitem__ only indexes what it holds
dataset_on_gpu                           static:python.dataloader                      bool    static.pyextra   its dataset is a TensorDataset of tensors already on the GPU (workers and pinning would fail)
dataset_pretokenized                     static:python.dataloader                      bool    static.pyextra   its dataset is a Hugging Face dataset tokenized up front (bound to a .map(...) result, or to a split or alias of one)
dataset_class                            static:python.dataloader                      text    static.pyextra   the class of the DataLoader's dataset where the code names it (empty: unknown)
kind                                     static:python.loop_call,file.error            text    static.python    item / cpu / tolist / numpy / print / synchronize (file.error: what went wrong)
call                                     static:python.*                               text    static.python    the call as written
periodic                                 static:python.loop_call,python.host_tensor_copy bool  static.python    guarded by a step % N condition
in_step_function                         static:python.loop_call,python.training_loop,python.host_tensor_copy bool static.python in a function that calls backward()
in_inner_loop                            static:python.loop_call                       bool    static.python    the call sits in a loop nested inside the training loop (or step function): it runs many times per step
loop_line                                static:python.loop_call                       count   static.python    line of that nested loop (0: none)
has_autocast                             static:python.training_loop                   bool    static.python    the loop runs under autocast
factory                                  static:python.host_tensor_copy                text    static.pyextra   the tensor factory called every step
breaker                                  static:python.compiled_forward                text    static.python    the graph-breaking call inside a compiled forward
certain                                  static:python.compiled_forward,python.conv_bias_bn bool static.python  the pattern is certain, not a guess from names
api                                      static:python.deprecated_amp                  text    static.python    the deprecated API used
replacement                              static:python.deprecated_amp                  text    static.python    what to use instead
optimizer                                static:python.optimizer                       text    static.pyextra   the optimizer class
foreach                                  static:python.optimizer                       text    static.pyextra   foreach / fused argument as written
dim                                      static:python.unaligned_dim                   text    static.pyextra   the argument that sets the size (vocab_size, out_features …)
size                                     static:python.unaligned_dim                   count   static.pyextra   the literal size, not a multiple of 8
padded                                   static:python.unaligned_dim                   count   static.pyextra   the size rounded up to a multiple of 64
find_unused_parameters                   static:python.ddp                             text    static.pyextra   DDP find_unused_parameters as written
backend                                  static:python.process_group                   text    static.pyextra   process-group backend
platform_branch                          static:python.process_group                   bool    static.pyextra   the call is inside an if that picks code by operating system
file_reduces_tensors                     static:python.process_group                   bool    static.python    its file wraps a model in DDP/FSDP or calls a collective
reader                                   static:python.whole_dataset_load              text    static.pyextra   the function reading the whole dataset
to_host                                  static:python.non_blocking                    bool    static.pyextra   the copy goes to the host (.to("cpu"), .cpu()): a device-to-host copy
loads_whole_model                        static:python.torch_load                      bool    static.pyextra   the load returns a pickled nn.Module (used as a module, or the file saves one whole): weights_only=True would fail
safe_globals                             static:python.torch_load                      bool    static.pyextra   the load runs under torch.serialization.safe_globals (or after add_safe_globals): weights_only=True works
use_reentrant                            static:python.checkpoint                      text    static.pyextra   checkpoint use_reentrant as written
layer                                    static:python.conv_layer,python.conv_bias_bn  text    static.python    the layer
module                                   static:python.cudagraph_reuse                 text    static.cudagraphs the CUDA-graph compiled module (or function) as written
calls                                    static:python.cudagraph_reuse                 count   static.cudagraphs how many times one loop iteration (or step function) calls it
mode                                     static:python.cudagraph_reuse                 text    static.cudagraphs the torch.compile mode (reduce-overhead / max-autotune)
compile_problem                          static:python.compile_no_effect               text    static.pycompile discarded (the result is dropped) / wrapped_before (a wrapper took the uncompiled model)
wrapper                                  static:python.compile_no_effect               text    static.pycompile the name the wrapper is bound to
wrapper_kind                             static:python.compile_no_effect               text    static.pycompile trainer / ddp / fsdp / data_parallel / deepspeed / accelerate / fabric
wrapper_call                             static:python.compile_no_effect               text    static.pycompile the wrapper call as written
wrapper_line                             static:python.compile_no_effect               count   static.pycompile the line of the wrapper call
sampler                                  static:python.sampler_epoch                   text    static.pysampler the name the DistributedSampler is bound to
epoch_line                               static:python.sampler_epoch                   count   static.pysampler the line of the file's first epoch loop
file_uses_accelerate                     static:python.grad_accumulation               bool    static.pyaccum   the file builds an accelerate.Accelerator
file_uses_accumulate                     static:python.grad_accumulation               bool    static.pyaccum   the file calls .accumulate( or .no_sync( on anything
attn_q                                   static:python.attention                       text    static.pyattention the queries operand of the scores' matmul, as written
attn_k                                   static:python.attention                       text    static.pyattention the keys operand (before its transpose), as written
attn_v                                   static:python.attention                       text    static.pyattention the values operand of the second matmul, as written
attn_masked                              static:python.attention                       bool    static.pyattention the scores go through masked_fill or where
attn_causal_mask                         static:python.attention                       bool    static.pyattention that mask looks causal (tril/triu or a bias/mask buffer filled with -inf)
attn_fix                                 static:python.attention                       text    static.pyattention the scaled_dot_product_attention call that replaces the chain
# --- static: deployment files ---
image                                    static:docker.base_image                      text    static.deploy    base image as written
repo                                     static:docker.base_image                      text    static.deploy    image repository
tag                                      static:docker.base_image                      text    static.deploy    image tag
tag_state                                static:docker.base_image                      text    static.deploy    digest / version / variable / floating / latest / none
gpu_image                                static:docker.base_image                      bool    static.deploy    a CUDA / PyTorch image
instruction                              static:docker.entrypoint                      text    static.deploy    CMD or ENTRYPOINT
form                                     static:docker.entrypoint                      text    static.deploy    exec / shell / exec-sh-c
uses_exec                                static:docker.entrypoint                      bool    static.deploy    the shell form execs the command
runs_launcher                            static:docker.entrypoint                      bool    static.deploy    the command starts a launcher (torchrun …)
command                                  static:docker.entrypoint,launch.command       text    static.deploy    the command as written
name                                     static:deploy.env                             text    static.deploy    variable name
value                                    static:deploy.env                             text    static.deploy    variable value
workload                                 static:deploy.shm                             text    static.deploy    the service, container or command
gpu                                      static:deploy.shm                             bool    static.deploy    the workload requests GPUs
shm_configured                           static:deploy.shm                             bool    static.deploy    shared memory is sized (--shm-size, ipc=host, emptyDir Memory)
shm_size_mib                             static:deploy.shm                             MiB     static.deploy    the size given (-1 unknown)
ipc_host                                 static:deploy.shm                             bool    static.deploy    the host's IPC namespace is shared
container                                static:k8s.container                          text    static.manifests container name
gpu_requests                             static:k8s.container                          count   static.manifests GPUs requested
gpu_limits                               static:k8s.container                          count   static.manifests GPUs limited
package                                  static:deploy.torch_install                   text    static.dockerinstall the package as named (torch, pytorch)
version_spec                             static:deploy.torch_install                   text    static.dockerinstall the version part as written (>=2, ==2.5.1, @ URL; empty: none)
pin_state                                static:deploy.torch_install                   text    static.dockerinstall pinned / range / none / nightly / variable
installer                                static:deploy.torch_install                   text    static.dockerinstall pip / uv / conda
index_url                                static:deploy.torch_install                   text    static.dockerinstall the index or find-links URL given (empty: none)
pre_release                              static:deploy.torch_install                   bool    static.dockerinstall pip's --pre is given
launch_workload                          static:deploy.rank_workers                    text    static.launchranks the container or compose service whose command starts the ranks
rank_launcher                            static:deploy.rank_workers                    text    static.launchranks torchrun / torch.distributed.run / deepspeed / accelerate
ranks_per_node                           static:deploy.rank_workers                    count   static.launchranks ranks the command starts per node (-1: not a literal)
script                                   static:deploy.rank_workers                    text    static.launchranks the script the command runs, as written (empty: none found)
script_path                              static:deploy.rank_workers                    text    static.launchranks the checked Python file that script is
script_found                             static:deploy.rank_workers                    bool    static.launchranks the script is one of the checked Python files (one match)
cpu_limit                                static:deploy.rank_workers                    number  static.launchranks CPUs the manifest gives the container (resources.limits.cpu, compose cpus; -1: not set)
workers_per_rank                         static:deploy.rank_workers                    count   static.launchranks the most num_workers a DataLoader of the script asks for as a literal (-1: unknown)
rank_processes                           static:deploy.rank_workers                    count   static.launchranks ranks × (workers_per_rank + 1): the busy processes the ranks and their workers make (-1: unknown)
launcher                                 static:launch.command                         text    static.deploy    the launcher (torch.distributed.launch …)
reason                                   static:file.error                             text    static.sites     why the file could not be analysed
detail                                   static:file.error                             text    static.sites     the error
# --- static: gradient accumulation under apex DDP (GD605, static.pyaccum) ---
file_uses_apex_ddp                       static:python.grad_accumulation               bool    static.pyaccum   the file wraps models in apex's DistributedDataParallel (apex.parallel, deepscale.distributed_apex), never torch's: no no_sync() to use
# --- static: anomaly detection behind a debugging option (GD307, static.pyanomaly) ---
debug_guarded                            static:python.anomaly_detection               bool    static.pyanomaly the call runs only on a debugging option: under an if (or in a function) that names debug/anomaly, or its mode is not a literal
# --- static: what the deployment file that sets an NCCL variable asks of the hardware (GD805) ---
gpus_requested                           static:deploy.env                             count   static.transportneeds the most GPUs per node a resource, docker run or launcher of the same file asks for as a literal (-1: all the node's GPUs; 0: none written, or a variable)
rdma_requested                           static:deploy.env                             bool    static.transportneeds the same file requests an RDMA device (/dev/infiniband, an rdma/… or mlnxnics resource) or names InfiniBand adapters (NCCL_IB_HCA)
# --- static: on a Python file's sites, the program it is part of: what it, the project modules it imports
#     and (for a module) the scripts that import it do (static.localimports, static.runner); the run
#     fact set holds the same over the whole checked tree, for deployment files ---
project_uses_cuda                        static:run,python.*                           bool    static.runner    the program (run: any checked file) moves work to CUDA
project_uses_ddp                         static:run,python.*                           bool    static.runner    the program (run: any checked file) uses DistributedDataParallel
project_has_distributed_sampler          static:run,python.*                           bool    static.runner    the program (run: any checked file) uses a DistributedSampler
project_pins_memory                      static:run,python.*                           bool    static.runner    the program (run: any checked file) pins host memory (DataLoader(pin_memory=True), .pin_memory(), a factory's pin_memory=True)
project_cudnn_benchmark                  static:run,python.*                           bool    static.runner    the program (run: any checked file) sets cudnn.benchmark
project_uses_no_sync                     static:run,python.*                           bool    static.runner    the program (run: any checked file) uses DDP no_sync()
project_has_grad_scaler                  static:run,python.*                           bool    static.runner    the program (run: any checked file) uses a GradScaler
project_has_autocast                     static:run,python.*                           bool    static.runner    the program (run: any checked file) uses autocast
project_dataloader_workers               static:run,python.*                           bool    static.runner    a DataLoader of the program (run: of any checked file) uses workers
project_uses_compile                     static:run,python.*                           bool    static.runner    the program (run: any checked file) calls torch.compile (or Module.compile)
project_reduces_tensors                  static:run,python.*                           bool    static.runner    the program (run: any checked file) wraps a model in DDP/FSDP or calls a collective
project_sets_precision                   static:run,python.*                           bool    static.runner    the program (run: any checked file) sets bf16/fp16/fp8 without autocast: weights cast (.bfloat16(), .half(), .to(torch.bfloat16)), fp8 matmuls, Accelerator(mixed_precision), Fabric/Trainer(precision), TrainingArguments(bf16/fp16/tf32), a DeepSpeed config with bf16/fp16
project_python_files                     static:run                                    count   static.runner    Python files checked
# --- static: precision set-up and scale of the program (static.pyprecision, static.pyscale, static.runner) ---
project_scales_loss                      static:run,python.*                           bool    static.runner    the program (run: any checked file) runs backward through a framework that scales the loss itself: accelerator/fabric/engine.backward(loss), loss_scaler(loss, optimizer), apex amp.scale_loss
project_declines_low_precision           static:run,python.*                           bool    static.runner    the program (run: any checked file) turns bf16/fp16 off in so many words: a DeepSpeed config (dict, or every JSON beside the script) with fp16/bf16 enabled false
project_toy_data                         static:run,python.*                           bool    static.runner    the program (run: any checked file) builds a small benchmark dataset (torchvision MNIST, CIFAR10 …, Planetoid)
project_real_data                        static:run,python.*                           bool    static.runner    the program (run: any checked file) builds a dataset of real size (ImageFolder, ImageNet, LSUN, COCO, load_dataset, WebDataset)
project_small_layers                     static:run,python.*                           bool    static.runner    the program (run: any checked file) builds a layer whose sizes are literals and small (at most 2M parameters)
project_large_model                      static:run,python.*                           bool    static.runner    the program (run: any checked file) builds a model of real size (torchvision.models / timm constructor, from_pretrained, a literal layer above 2M parameters)
project_toy_scale                        static:python.*                               bool    static.runner    the program trains a toy: no real dataset, and a toy dataset or small literal layers with no model of real size (static.pyscale.toy_scale)
attn_fused_alternative                   static:python.attention                       bool    static.pyattention the function with the hand-written chain also calls a fused kernel (scaled_dot_product_attention, flash_attn_func …): the chain is a fallback
attn_windowed                            static:python.attention                       bool    static.pyattention the function reads a window size (Swin-style window attention): the scores are window² small
flag_scope                               static:run,python.*                           text    static.runner    where the project_* flags were looked for, in words
file_is_test                             static:python.*                               bool    static.runner    the file is a test (tests/, test_*.py, *_test.py, conftest.py; [tool.gpudoctor] test-files)
gpu_job                                  static:python.*                               bool    static.runner    the file is no test and its program puts work on a GPU (.cuda(), .to(device), device=…, Accelerator…): GPU-performance rules judge it
# --- env: this machine (gpudoctor.static.machine) ---
driver_version                           env:machine                                   text    static.machine   NVIDIA driver version
driver_cuda                              env:machine                                   text    static.machine   CUDA version the driver supports
driver_cuda_version                      env:machine                                   number  static.machine   the same as a number (12.4 → 12040)
torch_version                            env:machine                                   text    static.machine   installed torch
torch_cuda                               env:machine                                   text    static.machine   CUDA version torch was built for
torch_cuda_version                       env:machine                                   number  static.machine   the same as a number
gpu_count                                env:machine                                   count   static.machine   GPUs NVML sees
gpu_uuids                                env:machine                                   list    static.machine   their UUIDs
nccl_version                             env:machine                                   text    static.machine   NCCL torch loads
cudnn_build                              env:machine                                   text    static.machine   cuDNN version torch was built with (asked of a child interpreter)
cudnn_runtime                            env:machine                                   text    static.machine   cuDNN version torch loads at run time
cudnn_versions_differ                    env:machine                                   bool    static.machine   build and run-time cuDNN differ in major or minor version
shm_size_mib                             env:machine                                   MiB     static.machine   size of /dev/shm
cuda_visible_devices                     env:machine                                   text    static.machine   CUDA_VISIBLE_DEVICES
cuda_visible_devices_unmatched           env:machine                                   count   static.machine   entries of CUDA_VISIBLE_DEVICES that match no GPU
ptrace_scope                             env:machine                                   count   static.machine   kernel.yama.ptrace_scope
cap_sys_ptrace                           env:machine                                   bool    static.machine   this process holds CAP_SYS_PTRACE
ptrace_permitted                         env:machine                                   bool    static.machine   attach can inject the agent
ptrace_reason                            env:machine                                   text    static.machine   why not, when not
is_root                                  env:machine                                   bool    static.machine   running as root
"""


class Registry:
    """Every declared fact, by name and source."""

    def __init__(self, specs: Iterable[FactSpec]) -> None:
        self._specs: dict[tuple[str, Source], FactSpec] = {}
        for spec in specs:
            key = (spec.name, spec.source)
            if key in self._specs:
                raise ValueError(f"fact {spec.name!r} of source {spec.source.value} is declared twice")
            self._specs[key] = spec

    def __iter__(self) -> Iterator[FactSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, name: str, source: Source) -> FactSpec | None:
        return self._specs.get((name, source))

    def names(self) -> set[str]:
        return {name for name, _ in self._specs}

    def knows(self, name: str, source: Source, scope: str) -> bool:
        """Whether ``name`` exists in fact sets of ``scope`` from ``source`` (``run`` facts are seen by all)."""
        spec = self._specs.get((name, source))
        if spec is None:
            return False
        return any(_scope_matches(s, scope) or s == "run" for s in spec.scopes)


def _scope_matches(declared: str, scope: str) -> bool:
    if declared == "*" or declared == scope:
        return True
    return declared.endswith(".*") and scope.startswith(declared[:-1])


def _parse(table: str) -> list[FactSpec]:
    specs: list[FactSpec] = []
    for number, line in enumerate(table.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 4)
        if len(parts) < 5:
            raise ValueError(f"fact registry line {number}: expected name, where, unit, producer, doc")
        name, where, unit, producer, doc = parts
        source_text, _, scopes = where.partition(":")
        if unit not in UNITS:
            raise ValueError(f"fact registry line {number}: unknown unit {unit!r}")
        specs.append(FactSpec(name, Source(source_text), tuple(scopes.split(",")), unit, producer, doc.strip()))
    return specs


REGISTRY = Registry(_parse(_TABLE))


def register(specs: Iterable[FactSpec]) -> None:
    """Add facts declared elsewhere (a user's rule directory has none; this is for tests and plugins)."""
    for spec in specs:
        REGISTRY._specs[(spec.name, spec.source)] = spec


def unknown_names(names: Iterable[str], source: Source, scope: str, options: Iterable[str]) -> list[str]:
    """Names a condition of ``source``/``scope`` uses that are neither facts, options nor location fields."""
    known_options = set(options)
    return sorted({n for n in names if n not in known_options and n not in LOCATION_NAMES
                   and not REGISTRY.knows(n, source, scope)})
