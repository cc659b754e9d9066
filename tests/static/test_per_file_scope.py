"""`gpudoctor check` on a directory judges DDP per file: one script's DDP is not another script's.

The false alarm this pins (issue 12): GD604 fired on a clean single-GPU script that sat beside a DDP
script, because the project-wide ``project_uses_ddp`` leaked into every file's DataLoader.
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

DDP_SCRIPT = '''\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader


def main():
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(8, 1).cuda())
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    for x, y in loader:
        loss = model(x.cuda(non_blocking=True)).sum()
        loss.backward()


if __name__ == "__main__":
    main()
'''

SINGLE_GPU_SCRIPT = '''\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(8, 1).cuda()
loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
for x, y in loader:
    loss = model(x.cuda(non_blocking=True)).sum()
    loss.backward()
'''

DATA_MODULE = '''\
from torch.utils.data import DataLoader


def make_loader(dataset):
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
'''


def _gd604(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out: dict[str, list[str]] = {name: [] for name in files}
    for f in check_findings([tmp_path]):
        if f.code == "GD604":
            out[Path(f.location.path or "").name].append(f"{f.location.line} {f.severity.value}")
    return out


def test_single_gpu_script_beside_ddp_script_is_clean(tmp_path: Path) -> None:
    found = _gd604(tmp_path, {"train_ddp.py": DDP_SCRIPT, "train_single.py": SINGLE_GPU_SCRIPT})
    assert found == {"train_ddp.py": ["10 warning"], "train_single.py": []}


def test_single_gpu_script_alone_is_clean(tmp_path: Path) -> None:
    assert _gd604(tmp_path, {"train_single.py": SINGLE_GPU_SCRIPT}) == {"train_single.py": []}


def test_loader_module_of_a_ddp_project_is_info(tmp_path: Path) -> None:
    # the module is part of the DDP script's program when the script imports it; a module no DDP script
    # imports is judged alone (the facts of the project do not leak into it)
    script = DDP_SCRIPT.replace("from torch.utils.data import DataLoader\n",
                                "from torch.utils.data import DataLoader\nfrom data import make_loader\n")
    found = _gd604(tmp_path, {"train_ddp.py": script, "data.py": DATA_MODULE})
    assert found == {"train_ddp.py": ["11 warning"], "data.py": ["5 info"]}
    found = _gd604(tmp_path, {"train_ddp.py": DDP_SCRIPT, "data.py": DATA_MODULE})
    assert found == {"train_ddp.py": ["10 warning"], "data.py": []}


def test_a_distributed_sampler_elsewhere_silences_the_module(tmp_path: Path) -> None:
    with_sampler = DDP_SCRIPT.replace("shuffle=True, num_workers", "sampler=DistributedSampler(dataset), num_workers")
    with_sampler = with_sampler.replace("import DataLoader", "import DataLoader, DistributedSampler")
    found = _gd604(tmp_path, {"train_ddp.py": with_sampler, "data.py": DATA_MODULE})
    assert found == {"train_ddp.py": [], "data.py": []}


# ---- GD403 static: "no torch.compile" in the script and what it imports (a module: in the checked code) ----
COMPILED_ELSEWHERE = '''\
import torch


def build():
    return torch.compile(torch.nn.Linear(8, 1).cuda())
'''


def _gd403(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return [f"{Path(f.location.path or '').name}:{f.location.line} {f.severity.value}"
            for f in check_findings([tmp_path]) if f.code == "GD403"]


def test_uncompiled_cuda_training_loop_is_info(tmp_path: Path) -> None:
    assert _gd403(tmp_path, {"train_single.py": SINGLE_GPU_SCRIPT}) == ["train_single.py:6 info"]


def test_compile_in_what_the_script_imports_silences_it(tmp_path: Path) -> None:
    # a script is judged by what it and its own imports do: a compile in a module it does not
    # import is another script's (the whole pytorch/examples tree hid every fp32 example's GD201/GD403
    # behind one example's autocast/compile)
    assert _gd403(tmp_path, {"train_single.py": SINGLE_GPU_SCRIPT, "model.py": COMPILED_ELSEWHERE}) == [
        "train_single.py:6 info"]
    importing = "from model import build\n" + SINGLE_GPU_SCRIPT
    assert _gd403(tmp_path, {"train_single.py": importing, "model.py": COMPILED_ELSEWHERE}) == []
    method = SINGLE_GPU_SCRIPT.replace("loader = DataLoader", "model.compile()\nloader = DataLoader")
    other = tmp_path / "method"
    other.mkdir()
    assert _gd403(other, {"train_single.py": method}) == []
    decorated = SINGLE_GPU_SCRIPT.replace("model = torch.nn.Linear(8, 1).cuda()",
                                          "model = torch.nn.Linear(8, 1).cuda()\n\n\n@torch.compile\ndef fwd(x):\n"
                                          "    return model(x)\n")
    third = tmp_path / "decorated"
    third.mkdir()
    assert _gd403(third, {"train_single.py": decorated}) == []


def test_re_compile_is_not_torch_compile(tmp_path: Path) -> None:
    text = "import re\nPATTERN = re.compile('x')\n" + SINGLE_GPU_SCRIPT
    assert _gd403(tmp_path, {"train_single.py": text}) == ["train_single.py:8 info"]
