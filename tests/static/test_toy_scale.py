"""Toy-size programs (MNIST, CIFAR, ``nn.Linear(20, 1)``) get GD201 and GD603 as info, real ones as warnings.

pytorch/examples' MNIST, VAE and DDP-tutorial scripts got "no autocast" warnings that are true and
not worth a reviewer's time: a two-layer MLP on 28×28 digits spends nothing that bf16 would save.
A real dataset (``ImageFolder``) or a model of real size (``torchvision.models.resnet50()``) keeps
the warning; so does a model sized by variables, which says nothing either way.
"""

from __future__ import annotations

import ast
from pathlib import Path

from static_helpers import check_findings

from gpudoctor.model import Severity
from gpudoctor.static import pynames as pn
from gpudoctor.static.pyscale import note_scale, toy_scale

SCRIPT = '''
import torch
from torch import nn
from torchvision import datasets, models

{data}
model = {model}.cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in torch.utils.data.DataLoader(data, batch_size=64):
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
'''
MNIST = 'data = datasets.MNIST("data", train=True, download=True)'
FOLDER = 'data = datasets.ImageFolder(args.data)'
MLP = "nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))"
SIZED_BY_ARGS = "nn.Sequential(nn.Linear(args.features, args.hidden), nn.Linear(args.hidden, args.classes))"


def _severities(tmp_path: Path, data: str, model: str, code: str = "GD201") -> list[Severity]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(data=data, model=model))
    return [f.severity for f in check_findings([script]) if f.code == code]


def test_mnist_or_small_layers_make_gd201_info(tmp_path: Path) -> None:
    assert _severities(tmp_path, MNIST, MLP) == [Severity.INFO]
    assert _severities(tmp_path, MNIST, "models.resnet18(num_classes=10)") == [Severity.INFO]  # a toy dataset caps it
    assert _severities(tmp_path, "data = random_pairs(1000)", MLP) == [Severity.INFO]


def test_real_data_or_model_keep_gd201_a_warning(tmp_path: Path) -> None:
    assert _severities(tmp_path, FOLDER, MLP) == [Severity.WARNING]
    assert _severities(tmp_path, MNIST + "\n" + FOLDER, MLP) == [Severity.WARNING]  # dcgan: --dataset picks one
    assert _severities(tmp_path, "data = random_pairs(1000)", "models.resnet50()") == [Severity.WARNING]
    assert _severities(tmp_path, "data = random_pairs(1000)", MLP.replace("784, 128", "4096, 4096")) == [Severity.WARNING]
    assert _severities(tmp_path, "data = load(args.data)", SIZED_BY_ARGS) == [Severity.WARNING]


def test_layer_sizes_and_the_combination() -> None:
    def flags(code: str) -> set[str]:
        names = pn.Names()
        out: dict[str, bool] = {}
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                names.add_import(node)
            elif isinstance(node, ast.ImportFrom):
                names.add_import_from(node)
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call):
                note_scale(out, node, names.qualname(node.func), names)
        return {k for k, v in out.items() if v}

    assert flags("import torch.nn as nn\nnn.Conv2d(1, 32, 3)\nnn.Linear(9216, 128)") == {"small_layers"}
    assert flags("import torch.nn as nn\nnn.Conv2d(512, 512, (3, 3))") == {"large_model"}  # 2.4M parameters
    assert flags("import torch.nn as nn\nnn.LSTM(args.ninp, args.nhid)") == set()
    assert flags("from transformers import AutoModel\nAutoModel.from_pretrained('gpt2')") == {"large_model"}
    assert toy_scale({"small_layers"}) and toy_scale({"toy_data", "large_model"})
    assert not toy_scale({"small_layers", "large_model"}) and not toy_scale({"toy_data", "real_data"})


DATA_PARALLEL = '''
import torch
import torch.distributed as dist
from torch import nn

model = Net(args.dim).cuda()
if args.distributed:
    dist.init_process_group("nccl")
    model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
else:
    model = nn.DataParallel(model)
'''


def test_data_parallel_beside_ddp_is_info(tmp_path: Path) -> None:
    """ImageNet's main.py: DataParallel is the fallback when the script runs without a launcher."""
    script = tmp_path / "main.py"
    script.write_text(DATA_PARALLEL)
    assert [f.severity for f in check_findings([script]) if f.code == "GD603"] == [Severity.INFO]
    script.write_text("import torch\nfrom torch import nn\n\nmodel = nn.DataParallel(Net(args.dim).cuda())\n")
    assert [f.severity for f in check_findings([script]) if f.code == "GD603"] == [Severity.WARNING]
