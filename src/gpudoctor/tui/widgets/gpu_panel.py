"""One panel per GPU: utilisation, SM and tensor-core activity, memory, power, clocks, throttling.

Why it exists: the GPU's own counters are the first evidence of *how* a job is slow (idle GPU,
CUDA-core FP32 instead of tensor cores, throttling, another tenant). It shows the collectors'
values and the history's series as sparklines; it computes nothing and polls nothing.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from gpudoctor.live.samples import GpuSample
from gpudoctor.tui.format import mem_pair, num, pct, shorten, update_static
from gpudoctor.tui.history import SnapshotHistory

_SPARK_FIELDS = (("util", "util_pct"), ("tensor", "gpm_tensor_util_pct"), ("mem", "mem_used_mib"))
_BLOCKS = "▁▂▃▄▅▆▇█"


def _scale_top(gpu: GpuSample, field_name: str) -> float:
    """The value a full bar stands for: 100 for percentages, the card's memory for memory."""
    if field_name == "mem_used_mib":
        return gpu.mem_total_mib or 1.0
    return 100.0


def bars(values: list[float], top: float, width: int) -> Text:
    """A sparkline on a FIXED scale (0..top), newest on the right.

    Textual's Sparkline scales to the data's own min..max, which draws a steady 99% utilisation as a
    flat line at the bottom; on a dashboard read at a glance the height must mean the same every time.
    """
    text = Text()
    shown = values[-width:] if width > 0 else []
    text.append(" " * max(width - len(shown), 0))
    for value in shown:
        level = min(len(_BLOCKS) - 1, max(0, int(value / top * len(_BLOCKS)))) if top > 0 else 0
        text.append(_BLOCKS[level], style="green" if level < 3 else "yellow" if level < 6 else "bold green")
    return text


class FixedSparkline(Static):
    """A one-line sparkline whose bar height means the same value on every refresh."""

    DEFAULT_CSS = "FixedSparkline { height: 1; }"

    def __init__(self, values: list[float], top: float, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._values, self._top = values, top

    def set_data(self, values: list[float], top: float) -> None:
        if values != self._values or top != self._top:
            self._values, self._top = values, top
            self.refresh()

    def render(self) -> Text:
        return bars(self._values, self._top, self.content_size.width)


def gpu_line(gpu: GpuSample) -> Text:
    """The one-line summary of a GPU reading."""
    text = Text()
    text.append(f"GPU{gpu.index} ", style="bold")
    text.append(shorten(gpu.name.replace("NVIDIA ", ""), 10) + " ")
    text.append("util ")
    text.append(pct(gpu.util_pct), style="bold")
    if gpu.gpm_sm_util_pct is not None:
        text.append(f" sm {pct(gpu.gpm_sm_util_pct)}")
    if gpu.gpm_tensor_util_pct is not None:
        text.append(" tensor ")
        text.append(pct(gpu.gpm_tensor_util_pct, 1), style="bold")
    text.append(f" mem {mem_pair(gpu.mem_used_mib, gpu.mem_total_mib)}")
    if gpu.power_w is not None:
        text.append(f" {num(gpu.power_w, 0, 'W')}")
        if gpu.power_limit_w:
            text.append(f"/{num(gpu.power_limit_w, 0, 'W')}")
    if gpu.sm_clock_mhz is not None:
        text.append(f" {num(gpu.sm_clock_mhz, 0, 'MHz')}")
    if gpu.temperature_c is not None:
        text.append(f" {num(gpu.temperature_c, 0, '°C')}")
    if gpu.throttle_reasons:
        text.append(" THROTTLED: " + ",".join(gpu.throttle_reasons), style="bold red")
    if gpu.other_pids:
        text.append(f" +{len(gpu.other_pids)} other proc", style="yellow")
    return text


class GpuRow(Vertical):
    """One device: its summary line and three labelled sparklines."""

    DEFAULT_CSS = """
    GpuRow { height: auto; }
    GpuRow .gpu-line { height: 1; }
    GpuRow Horizontal { height: 1; }
    GpuRow .spark-label { width: 7; height: 1; color: $text-muted; }
    GpuRow FixedSparkline { width: 1fr; height: 1; margin-right: 1; }
    """

    def __init__(self, gpu: GpuSample, history: SnapshotHistory) -> None:
        super().__init__(id=f"gpu-{gpu.index}")
        self.index = gpu.index
        self._gpu = gpu
        self._history = history

    def compose(self) -> ComposeResult:
        yield Static(gpu_line(self._gpu), classes="gpu-line")
        with Horizontal():
            for label, field_name in _SPARK_FIELDS:
                yield Static(label, classes="spark-label")
                yield FixedSparkline(self._history.gpu_series(self.index, field_name),
                                     _scale_top(self._gpu, field_name), id=f"spark-{field_name}")

    def show(self, gpu: GpuSample, history: SnapshotHistory) -> None:
        update_static(self.query_one(".gpu-line", Static), gpu_line(gpu))
        for _label, field_name in _SPARK_FIELDS:
            self.query_one(f"#spark-{field_name}", FixedSparkline).set_data(
                history.gpu_series(gpu.index, field_name), _scale_top(gpu, field_name))


class GpuPanel(Vertical):
    """All GPUs the target uses; says so plainly when NVML gives nothing."""

    DEFAULT_CSS = """
    GpuPanel { height: auto; }
    GpuPanel .no-gpu { height: auto; color: $text-muted; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._indices: tuple[int, ...] | None = None
        self._note = ""

    def compose(self) -> ComposeResult:
        yield Static("no GPU readings yet", classes="no-gpu")

    def show(self, gpus: tuple[GpuSample, ...], history: SnapshotHistory, notes: tuple[str, ...] = ()) -> None:
        indices = tuple(g.index for g in gpus)
        note = next((n for n in notes if "NVML" in n or "GPU" in n), "no GPU readings")
        if indices != self._indices or (not gpus and note != self._note):
            self._indices, self._note = indices, note
            self.remove_children()
            if gpus:
                self.mount_all([GpuRow(gpu, history) for gpu in gpus])
            else:
                self.mount(Static(note, classes="no-gpu"))
            return
        for row in self.query(GpuRow):
            gpu = next((g for g in gpus if g.index == row.index), None)
            if gpu is not None and row.children:
                row.show(gpu, history)
