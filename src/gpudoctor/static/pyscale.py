"""How big the program's model and data look: a toy (MNIST, CIFAR, ``nn.Linear(20, 1)``) or a real job.

Why this exists: GD201 (no autocast) and GD603 (``nn.DataParallel``) are true of a tutorial that
trains a two-layer MLP on MNIST, but not worth a reviewer's time there: the step takes a millisecond
and fp32 costs nothing that matters. pytorch/examples alone gave 20 such warnings. Four flags, OR-ed
over the program like the others (:data:`gpudoctor.static.python.FLAGS`):

- ``toy_data``: a small benchmark dataset is built (``torchvision.datasets.MNIST``, ``CIFAR10`` …,
  ``Planetoid``);
- ``real_data``: a dataset of real size is (``ImageFolder``, ``ImageNet``, ``LSUN``, COCO, Hugging Face
  ``load_dataset``, WebDataset);
- ``small_layers``: a layer is built whose sizes are all literals and small (≤ 2M parameters:
  ``nn.Linear(9216, 128)``, ``nn.Conv2d(1, 32, 3)``);
- ``large_model``: a model of real size is (a ``torchvision.models`` or ``timm`` constructor,
  ``from_pretrained``, a literal layer above 2M parameters).

:func:`toy_scale` combines them: a real dataset makes a real job; else a toy dataset makes a toy one
(a ResNet-18 on 28×28 MNIST digits is still small), and so do small literal layers with no model of
real size. Layers sized by variables (``nn.Linear(args.hidden, vocab)``) say nothing either way.
What it must not do: decide on a finding, or guess from file or variable names.
"""

from __future__ import annotations

import ast
from collections.abc import Collection

from gpudoctor.static import pynames as pn

_TOY_DATASETS = frozenset(f"torchvision.datasets.{n}" for n in (
    "MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS", "STL10",
    "Omniglot", "SEMEION", "FakeData")) | {"torch_geometric.datasets.Planetoid"}
_REAL_DATASETS = frozenset(f"torchvision.datasets.{n}" for n in (
    "ImageFolder", "DatasetFolder", "ImageNet", "LSUN", "CocoDetection", "CocoCaptions", "Kinetics", "Places365",
    "CelebA", "VOCDetection", "VOCSegmentation", "Cityscapes", "INaturalist", "Food101")) | {
    "datasets.load_dataset", "webdataset.WebDataset"}
#: layer → how its parameter count follows from its literal positional sizes
_LAYERS = frozenset(f"torch.nn.{n}" for n in ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
                                               "ConvTranspose2d", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN"))
#: a layer above this many parameters is no toy's
MAX_SMALL_LAYER_PARAMS = 2 ** 21


def _layer_params(node: ast.Call, qual: str) -> int | None:
    """Parameters of a layer built with literal sizes; None when a size is not a literal."""
    sizes = [pn.literal(a) for a in node.args[:3]]
    first, second = (sizes + [None, None])[:2]
    if not isinstance(first, int) or not isinstance(second, int) or isinstance(first, bool) or isinstance(second, bool):
        return None
    last = qual.rsplit(".", 1)[-1]
    if last.startswith("Conv"):
        kernel = sizes[2] if len(sizes) > 2 else pn.literal(pn.keyword(node, "kernel_size"))
        if isinstance(kernel, tuple) and all(isinstance(k, int) for k in kernel):
            area = 1
            for k in kernel:
                area *= k
        elif isinstance(kernel, int):
            area = kernel ** int(last[-2]) if last[-2].isdigit() else kernel
        else:
            return None
        return first * second * area
    if last in ("LSTM", "GRU", "RNN"):
        return {"LSTM": 4, "GRU": 3, "RNN": 1}[last] * second * (first + second)
    return first * second


def note_scale(flags: dict[str, bool], node: ast.Call, qual: str | None, names: pn.Names) -> None:
    """Set the scale flags one call shows (``flags`` is the walker's)."""
    if qual is None:
        return
    if names.is_one_of(qual, _TOY_DATASETS):
        flags["toy_data"] = True
    elif names.is_one_of(qual, _REAL_DATASETS):
        flags["real_data"] = True
    elif qual in _LAYERS:
        params = _layer_params(node, qual)
        if params is not None:
            flags["small_layers" if params <= MAX_SMALL_LAYER_PARAMS else "large_model"] = True
    elif qual.startswith("torchvision.models.") and qual.rsplit(".", 1)[-1][:1].islower() \
            or qual in ("timm.create_model", "torchvision.models.get_model") or qual.endswith(".from_pretrained"):
        flags["large_model"] = True


def toy_scale(reached: Collection[str]) -> bool:
    """Whether a program whose set flags are ``reached`` trains a toy: no real dataset, and a toy
    dataset or small literal layers with no model of real size."""
    if "real_data" in reached:
        return False
    return "toy_data" in reached or ("small_layers" in reached and "large_model" not in reached)
