"""Per-call checks of the Python walker that do not depend on loop structure.

Split from :mod:`gpudoctor.static.python` to keep each module readable. Each check records a site
with plain facts (or flips a project flag); none of them decides on a finding.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpudoctor.model import FactValue
from gpudoctor.static import pynames as pn
from gpudoctor.static import pyprecision, pyscale
from gpudoctor.static.sites import Site

if TYPE_CHECKING:
    from gpudoctor.static.python import PythonChecker


def check_call_extras(ck: PythonChecker, node: ast.Call, qual: str | None, attr: str | None) -> None:
    """Record sites for one call. ``qual`` is the callee's resolved dotted name, ``attr`` its method name."""
    names = ck.names
    func = node.func
    if names.is_one_of(qual, pn.DATALOADER):
        _dataloader(ck, node)
    elif names.is_one_of(qual, pn.DATA_PARALLEL):
        ck.emit("python.data_parallel", node, call=pn.short(func))
    elif names.is_one_of(qual, pn.DDP):
        ck.flags["uses_ddp"] = True
        ck.flags["reduces_tensors"] = True
        ck.emit("python.ddp", node, find_unused_parameters=pn.tri_state(pn.keyword(node, "find_unused_parameters")))
    elif names.is_one_of(qual, pn.AUTOCAST):
        ck.flags["has_autocast"] = True
        if ck.autocast_is_fp16(node) and ck.autocast_enabled(node):
            ck.emit("python.fp16_autocast", node, call=pn.short(node, 50))
    elif names.is_one_of(qual, pn.GRAD_SCALER):
        ck.flags["has_grad_scaler"] = True
    elif qual in ("torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"):
        ck.flags["uses_ddp"] = True
        backend_node = pn.keyword(node, "backend") or (node.args[0] if node.args else None)
        backend = pn.literal(backend_node)
        ck.emit("python.process_group", node, backend=backend.lower() if isinstance(backend, str) else "",
                platform_branch=ck.platform_depth > 0)
    elif names.is_one_of(qual, pn.COLLECTIVES):
        ck.flags["reduces_tensors"] = True
    elif qual == "torch.load":
        if pn.keyword(node, "weights_only") is None and not any(k.arg is None for k in node.keywords):
            ck.emit("python.torch_load", node, call=pn.short(node, 50))
    elif qual in ("torch.autograd.set_detect_anomaly", "torch.autograd.detect_anomaly",
                  "torch.autograd.anomaly_mode.set_detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"):
        flag = pn.keyword(node, "mode") or (node.args[0] if node.args and qual.endswith("set_detect_anomaly") else None)
        if not qual.endswith("set_detect_anomaly") or pn.literal(flag) is not False:
            ck.emit("python.anomaly_detection", node, call=pn.short(node, 50))
    elif qual == "torch.nn.Sequential":
        for conv, certain in _sequential_conv_bn(node, names):
            ck.emit("python.conv_bias_bn", conv, layer=pn.short(conv.func), certain=certain)
    elif qual is not None and qual.startswith(pn.OPTIMIZER_PREFIX) and qual.count(".") == 2 and qual[12:13].isupper():
        if pn.literal(pn.keyword(node, "foreach")) is False:
            ck.emit("python.optimizer", node, optimizer=qual.rsplit(".", 1)[-1], foreach="false")
    elif qual in ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"):
        if not any(k.arg is None for k in node.keywords):
            ck.emit("python.checkpoint", node, call=pn.short(node.func),
                    use_reentrant=pn.tri_state(pn.keyword(node, "use_reentrant")))
    elif qual in pn.WHOLE_FILE_READERS:
        _reader(ck, node, qual)
    elif attr == "compile" and not node.args and qual is not None and not qual.startswith(("re.", "regex.")):
        ck.flags["uses_compile"] = True  # nn.Module.compile(**kwargs), compiles in place
    elif qual == "deepspeed.initialize":
        ck.deepspeed_engine = True
    torch_compile = pn.keyword(node, "torch_compile")  # HF TrainingArguments(torch_compile=True)
    if torch_compile is not None and pn.literal(torch_compile) not in (False, None):
        ck.flags["uses_compile"] = True
    _unaligned_dims(ck, node, qual)
    if not ck.flags["uses_cuda"] and marks_cuda_use(node, qual, attr, names):
        ck.flags["uses_cuda"] = True
    if not ck.flags["pins_memory"] and pn.literal(pn.keyword(node, "pin_memory")) is True:
        ck.flags["pins_memory"] = True  # torch.empty(..., pin_memory=True): a pinned buffer batches are sliced from
    if not ck.flags["sets_precision"] and (sets_low_precision(node, qual, attr, names)
                                           or pyprecision.precision_policy(node, qual, names)
                                           or pyprecision.accelerator_leaves_precision_to_launch(node, qual,
                                                                                                 ck.dict_keys)):
        ck.flags["sets_precision"] = True
    if not ck.flags["scales_loss"] and pyprecision.scales_loss(node, qual, attr):
        ck.flags["scales_loss"] = True
    pyscale.note_scale(ck.flags, node, qual, names)
    is_conv = names.is_one_of(qual, pn.CONV_LAYERS) or (qual or "").startswith("torchvision.models.resnet")
    if is_conv and ck.first_conv is None:
        ck.first_conv = node
    if attr is not None:
        _method(ck, node, attr)


def _method(ck: PythonChecker, node: ast.Call, attr: str) -> None:
    func = node.func
    assert isinstance(func, ast.Attribute)
    if attr == "no_sync":
        ck.flags["uses_no_sync"] = True
    elif attr == "pin_memory":
        ck.flags["pins_memory"] = True
    elif attr == "zero_grad":
        if pn.literal(pn.keyword(node, "set_to_none")) is False:
            ck.emit("python.zero_grad", node, call=pn.short(node, 50))
    elif attr == "compile" and isinstance(func.value, ast.Name) and func.value.id in ck.var_class:
        ck.compiled_classes.add(ck.var_class[func.value.id])
    if attr in ("cuda", "to"):
        on_cuda = attr == "cuda" or any(pn.mentions_cuda(a) for a in node.args) or any(
            isinstance(a, ast.Name) and "device" in a.id for a in node.args) or pn.keyword(node, "device") is not None
        if pn.literal(pn.keyword(node, "non_blocking")) is True:
            ck.emit("python.non_blocking", node, call=pn.short(node, 50), to_host=_copies_to_host(node))
        receiver = func.value
        factory = ck.names.qualname(receiver.func) if isinstance(receiver, ast.Call) else None
        if on_cuda and isinstance(receiver, ast.Call) and pn.keyword(receiver, "device") is None and (
                factory in pn.TENSOR_FACTORIES
                or (factory in pn.VALUE_FACTORIES and receiver.args and pn.is_literal_expr(receiver.args[0]))):
            ck.in_step("python.host_tensor_copy", node, call=pn.short(node, 50), factory=factory or "")


#: Wrappers that put the model (and the batches they prepare) on the GPU when there is one.
_GPU_WRAPPERS = ("Accelerator", "Fabric")


def _names_device(node: ast.AST) -> bool:
    """A CUDA device string, or a variable or attribute named like a device (``device``, ``args.device``,
    ``local_rank``): ``.to(x)`` with such an argument moves the tensor to a GPU."""
    if isinstance(node, ast.Constant):
        return pn.mentions_cuda(node)
    if isinstance(node, ast.IfExp):
        return _names_device(node.body) or _names_device(node.orelse)
    if isinstance(node, ast.Call):  # torch.device("cuda", rank)
        return any(_names_device(a) for a in node.args)
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    lower = name.lower()
    return "device" in lower or "rank" in lower or lower in ("gpu", "cuda")


def marks_cuda_use(node: ast.Call, qual: str | None, attr: str | None, names: pn.Names) -> bool:
    """Whether the call puts work on a GPU: ``.cuda()``, ``.to("cuda"/device)``, ``device="cuda"`` (or a
    device variable) given to a factory or module, ``torch.device("cuda")``, ``torch.cuda.set_device``,
    or a wrapper that places the model itself (``Accelerator``, ``Fabric``, ``deepspeed.initialize``).
    Naming ``torch.cuda`` (``manual_seed_all``, ``is_available``) does not."""
    if attr == "cuda":
        return True
    if attr == "to" and (any(_names_device(a) for a in node.args) or pn.keyword(node, "device") is not None):
        return True
    if qual in ("torch.device", "torch.cuda.set_device", "deepspeed.initialize"):
        return qual != "torch.device" or any(_names_device(a) for a in node.args)
    device = pn.keyword(node, "device")
    if device is not None and _names_device(device):
        return True
    last = (qual or "").rsplit(".", 1)[-1]
    return last in _GPU_WRAPPERS


#: dtypes whose matmuls run on tensor cores at 16 bits or less
LOW_PRECISION_DTYPES = frozenset({"torch.bfloat16", "torch.float16", "torch.half", "torch.float8_e4m3fn",
                                  "torch.float8_e5m2", "torch.float8_e4m3fnuz", "torch.float8_e5m2fnuz"})
#: fp8 matmul and fp8 training entry points (PyTorch, torchao, Transformer Engine, MS-AMP)
_FP8_CALLS = ("torch._scaled_mm", "torchao.float8.convert_to_float8_training", "transformer_engine.pytorch.fp8_autocast",
              "msamp.initialize")
#: keyword → the literal values that leave training in fp32
_PRECISION_KEYWORDS = {"mixed_precision": ("no", None, False), "precision": ("32", "32-true", 32, "64", "64-true", 64, None),
                       "bf16": (False, None), "fp16": (False, None), "torch_dtype": (None, "float32"),
                       "dtype": (None,), "tf32": (False, None)}


def _is_low_dtype(node: ast.AST, names: pn.Names) -> bool:
    qual = names.qualname(node)
    return qual in LOW_PRECISION_DTYPES or (isinstance(node, ast.Constant) and node.value in ("bfloat16", "float16"))


def sets_low_precision(node: ast.Call, qual: str | None, attr: str | None, names: pn.Names) -> bool:
    """Whether the call sets training up in bf16/fp16/fp8 without ``torch.autocast``: weights cast
    (``.bfloat16()``, ``.half()``, ``.to(torch.bfloat16)``, ``torch.set_default_dtype(torch.bfloat16)``,
    ``from_pretrained(torch_dtype=torch.bfloat16)``), fp8 matmuls, or a wrapper's precision argument —
    ``Accelerator(mixed_precision=…)`` (or none: ``accelerate launch`` and its config choose it),
    ``Fabric(precision="bf16-true")``, ``Trainer(precision=…)``, HF ``TrainingArguments(bf16=…/fp16=…)``;
    anything that is not a literal fp32 counts (``mixed_precision=args.mixed_precision``)."""
    if attr in ("bfloat16", "half") and not node.args:
        return True
    if attr == "to" and (any(_is_low_dtype(a, names) for a in node.args)
                         or any(k.arg == "dtype" and _is_low_dtype(k.value, names) for k in node.keywords)):
        return True
    if qual in _FP8_CALLS or (qual or "").startswith(("torchao.float8", "transformer_engine")):
        return True
    if qual == "torch.set_default_dtype" and node.args and _is_low_dtype(node.args[0], names):
        return True
    if qual == "torch.set_float32_matmul_precision" and node.args and pn.literal(node.args[0]) in ("high", "medium"):
        return True  # TF32 tensor cores: "matmuls run in FP32" is not so
    last = (qual or "").rsplit(".", 1)[-1]
    if last == "Accelerator" and pn.keyword(node, "mixed_precision") is None and not any(
            k.arg is None for k in node.keywords):
        return True
    for keyword in node.keywords:
        fp32 = _PRECISION_KEYWORDS.get(keyword.arg or "")
        if fp32 is None:
            continue
        if keyword.arg in ("torch_dtype", "dtype"):
            # a model built or loaded in bf16 (GPT(config, dtype=torch.bfloat16), from_pretrained(torch_dtype=…)),
            # not a buffer or a functools.partial
            if (last[:1].isupper() or last == "from_pretrained") and _is_low_dtype(keyword.value, names):
                return True
            continue
        if keyword.arg == "precision" and not (last.endswith(("Trainer", "Fabric")) or last == "Strategy"):
            continue
        if keyword.arg in ("bf16", "fp16", "tf32") and not last.endswith(("Arguments", "Config", "Args")):
            continue  # HF TrainingArguments / SFTConfig, not a helper's own tf32= argument
        value = pn.literal(keyword.value)
        if value is ... or value not in fp32:
            return True
    return False


def low_precision_config(node: ast.Dict) -> bool:
    """A DeepSpeed config written as a dict: ``"bf16": {"enabled": …}`` or ``"fp16": {…}`` whose
    ``enabled`` is not a literal False."""
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and key.value in ("bf16", "fp16", "bfloat16") and isinstance(value, ast.Dict):
            enabled = next((v for k, v in zip(value.keys, value.values)
                            if isinstance(k, ast.Constant) and k.value == "enabled"), None)
            if enabled is None or pn.literal(enabled) is not False:
                return True
    return False


def _copies_to_host(node: ast.Call) -> bool:
    """``t.to("cpu", non_blocking=True)`` / ``t.to(device="cpu")``: a device-to-host copy, whose
    source is GPU memory (pinning is about the host side of a host-to-device copy)."""
    target = pn.keyword(node, "device") or (node.args[0] if node.args else None)
    value = pn.literal(target)
    return isinstance(value, str) and value.startswith("cpu") or (
        isinstance(target, ast.Call) and pn.literal(target.args[0] if target.args else None) == "cpu")


def _dataloader(ck: PythonChecker, node: ast.Call) -> None:
    starred = any(k.arg is None for k in node.keywords)
    workers_node = pn.keyword(node, "num_workers")
    if workers_node is None:
        workers = -1 if starred else 0
    else:
        value = pn.literal(workers_node)
        workers = value if isinstance(value, int) and not isinstance(value, bool) else -1
    pin = pn.tri_state(pn.keyword(node, "pin_memory"))
    persistent = pn.tri_state(pn.keyword(node, "persistent_workers"))
    if starred:
        pin = "dynamic" if pin == "unset" else pin
        persistent = "dynamic" if persistent == "unset" else persistent
    sampler = any(pn.keyword(node, k) is not None for k in ("sampler", "batch_sampler")) or starred
    if workers != 0:
        ck.flags["dataloader_workers"] = True
    if pin in ("true", "dynamic"):
        ck.flags["pins_memory"] = True
    # dataset_in_memory is set once the walk has seen the file's classes (PythonChecker.check)
    ck.emit("python.dataloader", node, label=pn.short(node, 50), num_workers=workers, pin_memory=pin,
            persistent_workers=persistent, sampler_given=sampler, dataset_class=_dataset_class(ck, node) or "",
            dataset_on_gpu=_dataset_on_gpu(ck, node), dataset_pretokenized=_dataset_mapped(ck, node))


def _dataset_expr(loader: ast.Call) -> ast.expr | None:
    return loader.args[0] if loader.args else pn.keyword(loader, "dataset")


def _root_name(node: ast.expr | None) -> str | None:
    """``tokenized["train"]`` → ``tokenized``; ``data`` → ``data``."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _on_gpu(ck: PythonChecker, node: ast.expr) -> bool:
    if isinstance(node, ast.Call) and marks_cuda_use(node, ck.names.qualname(node.func),
                                                     node.func.attr if isinstance(node.func, ast.Attribute) else None,
                                                     ck.names) and not _copies_to_host(node):
        return True
    name = _root_name(node)
    return name is not None and name in ck.gpu_names


def _dataset_on_gpu(ck: PythonChecker, loader: ast.Call) -> bool:
    """A ``TensorDataset`` of tensors already on the GPU (made there, or moved with ``.cuda()`` /
    ``.to(device)``, in the call or bound to a name in this file): workers cannot hand out CUDA tensors
    (they fail to start), and pinning CUDA memory raises."""
    dataset = _dataset_expr(loader)
    if isinstance(dataset, ast.Name) and dataset.id in ck.gpu_names:
        return True
    if isinstance(dataset, ast.Name):
        dataset = ck.dataset_calls.get(dataset.id)
    return isinstance(dataset, ast.Call) and ck.names.matches(dataset.func, pn.TENSOR_DATASET) and \
        bool(dataset.args) and all(_on_gpu(ck, a) for a in dataset.args)


def _dataset_mapped(ck: PythonChecker, loader: ast.Call) -> bool:
    """A Hugging Face dataset tokenized up front (``tokenized = raw.map(tokenize, batched=True)``;
    ``DataLoader(tokenized["train"], …)``): a batch is rows of an Arrow table, read from memory."""
    name = _root_name(_dataset_expr(loader))
    return name is not None and name in ck.mapped_names


def _dataset_class(ck: PythonChecker, loader: ast.Call) -> str | None:
    """The class of the DataLoader's dataset where the code says it: made in the call
    (``TensorDataset`` however it is imported) or bound to a name in this file."""
    dataset = loader.args[0] if loader.args else pn.keyword(loader, "dataset")
    if isinstance(dataset, ast.Call):
        if ck.names.matches(dataset.func, pn.TENSOR_DATASET):
            return "TensorDataset"
        return dataset.func.id if isinstance(dataset.func, ast.Name) else None
    return ck.var_class.get(dataset.id) if isinstance(dataset, ast.Name) else None


def _reader(ck: PythonChecker, node: ast.Call, qual: str) -> None:
    if qual == "numpy.load" and pn.keyword(node, "mmap_mode") is not None:
        return
    fn = ck.functions[-1].node.name if ck.functions else ""
    if fn == "__getitem__" or ck.rank_guard_depth:
        return
    ck.emit("python.whole_dataset_load", node, reader=qual, call=pn.short(node, 50))


def _is_conv_with_bias(call: ast.AST, names: pn.Names) -> bool:
    if not (isinstance(call, ast.Call) and names.matches(call.func, pn.CONV_LAYERS)):
        return False
    bias = pn.keyword(call, "bias")
    if bias is None and len(call.args) >= 8:
        bias = call.args[7]
    return bias is None or pn.literal(bias) is True


def _is_bn(call: ast.AST, names: pn.Names) -> bool:
    return isinstance(call, ast.Call) and names.matches(call.func, pn.BATCHNORM_LAYERS)


def _sequential_conv_bn(node: ast.Call, names: pn.Names) -> Iterator[tuple[ast.Call, bool]]:
    for first, second in zip(node.args, node.args[1:]):
        if _is_conv_with_bias(first, names) and _is_bn(second, names):
            assert isinstance(first, ast.Call)
            yield first, True


def conv_bias_pairs(body: list[ast.stmt], names: pn.Names) -> Iterator[tuple[ast.Call, bool]]:
    """``self.conv = nn.Conv2d(...)`` right before ``self.bn = nn.BatchNorm2d(...)`` in ``__init__``.

    Only "maybe" (``certain=False``): ``forward`` may not apply them in that order.
    """
    values = [s.value if isinstance(s, ast.Assign) else None for s in body]
    for first, second in zip(values, values[1:]):
        if first is not None and second is not None and _is_conv_with_bias(first, names) and _is_bn(second, names):
            assert isinstance(first, ast.Call)
            yield first, False


def file_context(tree: ast.Module, flags: dict[str, bool], sites: list[Site]) -> dict[str, FactValue]:
    """Facts about the file as a whole, for rules that must judge one script, not the project.

    ``gpudoctor check`` on a directory sees a DDP script and a single-GPU script side by side: a
    DataLoader is judged against the DDP use of *its own* file. A file that is an entry point (a
    ``if __name__ == "__main__":`` block or its own training loop) runs on its own; a module without
    one may be imported by a DDP script elsewhere in the project.
    """
    main_guard = pn.has_main_guard(tree)
    return {"file_uses_ddp": flags["uses_ddp"], "file_has_distributed_sampler": flags["has_distributed_sampler"],
            "file_is_entry_point": main_guard or any(s.scope == "python.training_loop" for s in sites)}


#: Literal matrix dimensions from which an unaligned size matters (GD211): a big vocabulary or a wide
#: layer; a 10-class head is unaligned too, and costs nothing.
_MIN_UNALIGNED_DIM = 1000
_DIM_LAYERS = {"torch.nn.Linear": ("in_features", "out_features"), "torch.nn.Embedding": ("num_embeddings", "embedding_dim")}


def _unaligned_dims(ck: PythonChecker, node: ast.Call, qual: str | None) -> None:
    """A literal ``vocab_size=`` (any config class) or ``nn.Linear``/``nn.Embedding`` size that is
    large and not a multiple of 8: its bf16/fp16 GEMMs fall back to slow unaligned kernels."""
    dims: list[tuple[str, ast.expr]] = [("vocab_size", k.value) for k in node.keywords if k.arg == "vocab_size"]
    if qual in _DIM_LAYERS:
        params = _DIM_LAYERS[qual]
        dims += list(zip(params, node.args))
        dims += [(k.arg, k.value) for k in node.keywords if k.arg in params]
    for dim, value_node in dims:
        value = pn.literal(value_node)
        if type(value) is int and value >= _MIN_UNALIGNED_DIM and value % 8:
            ck.emit("python.unaligned_dim", node, call=pn.short(node.func), dim=dim, size=value,
                    padded=(value + 63) // 64 * 64)


#: keys that make a JSON object or a dict a DeepSpeed config
_DEEPSPEED_KEYS = frozenset({"train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization",
                             "optimizer", "fp16", "bf16", "gradient_accumulation_steps"})


def is_deepspeed_config(node: ast.Dict) -> bool:
    """A dict literal with DeepSpeed config keys (``{"train_batch_size": …, "zero_optimization": …}``)."""
    # "optimizer" alone is a checkpoint dict's key too ({"epoch": …, "optimizer": opt.state_dict()})
    return any(isinstance(k, ast.Constant) and k.value in _DEEPSPEED_KEYS and k.value != "optimizer" for k in node.keys)


#: JSON files beside a DeepSpeed script that are read for its precision, at most (and bytes each)
MAX_DEEPSPEED_CONFIGS = 32
MAX_DEEPSPEED_CONFIG_BYTES = 256 * 1024


def _deepspeed_json_configs(script: str) -> Iterator[dict[str, Any]]:
    """The DeepSpeed configs beside ``script`` (``*.json`` in its directory or a ``configs``-like
    subdirectory one level down; a JSON object with ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
    ``zero_optimization``, ``optimizer``, ``fp16`` or ``bf16``), at most :data:`MAX_DEEPSPEED_CONFIGS`."""
    import json
    import os

    base = os.path.dirname(os.path.abspath(script))
    candidates: list[str] = []
    try:
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name)
            if name.endswith(".json"):
                candidates.append(path)
            elif os.path.isdir(path) and ("config" in name.lower() or name.lower().startswith("ds")):
                candidates.extend(os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".json"))
    except OSError:
        return
    for path in candidates[:MAX_DEEPSPEED_CONFIGS]:
        try:
            if os.path.getsize(path) > MAX_DEEPSPEED_CONFIG_BYTES:
                continue
            with open(path, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(config, dict) and _DEEPSPEED_KEYS.intersection(config):
            yield config


def deepspeed_json_precision(script: str) -> bool | None:
    """Whether a DeepSpeed config beside ``script`` (:func:`_deepspeed_json_configs`) enables ``bf16`` or
    ``fp16``: ``deepspeed.initialize(args=args)`` takes the precision from ``--deepspeed_config
    ds_config.json``, so the script's own code has no autocast and no cast, and trains in bf16/fp16 all
    the same. None when no DeepSpeed config is there: the precision is then not known."""
    found = False
    for config in _deepspeed_json_configs(script):
        found = True
        if any(isinstance(config.get(k), dict) and config[k].get("enabled", True) not in (False, "false")
               for k in ("bf16", "fp16", "bfloat16")):
            return True
    return False if found else None


def deepspeed_json_declines(script: str) -> bool:
    """Whether there are DeepSpeed configs beside ``script`` and every one turns fp16/bf16 off in so many
    words (``"fp16": {"enabled": false}``): fp32 by the author's choice, not by default."""
    configs = list(_deepspeed_json_configs(script))
    return bool(configs) and all(
        any(isinstance(c.get(k), dict) and c[k].get("enabled", True) in (False, "false")
            for k in ("bf16", "fp16", "bfloat16")) for c in configs)


#: Methods only a module has: ``m.eval()`` on what ``torch.load`` returned means a pickled nn.Module.
_MODULE_METHODS = frozenset({"eval", "train", "parameters", "named_parameters", "state_dict", "modules",
                             "children", "cuda", "half", "bfloat16", "forward", "named_modules"})


def mark_whole_model_loads(tree: ast.Module, sites: list[Site]) -> None:
    """Set ``loads_whole_model`` on each ``python.torch_load`` site: whether the load returns a whole
    pickled ``nn.Module`` — the result is bound to a name that is then used as a module (``m.eval()``,
    ``m(x)``, ``m.parameters()``), or the file saves a module whole (``torch.save(model, path)``, not
    its ``state_dict()``). ``weights_only=True`` (GD802's usual fix, torch 2.6's default) makes such a
    load fail: the fix is a state_dict, or ``weights_only=False`` for a trusted file. Under
    ``torch.serialization.safe_globals([...])`` (or after ``add_safe_globals``) the classes it needs are
    allowed and the load works with ``weights_only=True`` (pytorch/examples' super_resolution): such a
    site has ``safe_globals`` instead."""
    loads = [s for s in sites if s.scope == "python.torch_load"]
    if not loads:
        return
    bound: dict[int, str] = {}  # line of a torch.load call → the name its result is bound to
    used_as_module: set[str] = set()
    saves_module = False
    allowed: list[tuple[int, int]] = []  # lines under ``with torch.serialization.safe_globals([...])``
    allowed_everywhere = False  # torch.serialization.add_safe_globals([...])
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "safe_globals":
                    allowed.append((node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_safe_globals":
            allowed_everywhere = True
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "load":
                    bound[call.lineno] = node.targets[0].id
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _MODULE_METHODS and isinstance(func.value, ast.Name):
                used_as_module.add(func.value.id)
            elif isinstance(func, ast.Name):
                used_as_module.add(func.id)
            if isinstance(func, ast.Attribute) and func.attr == "save" and isinstance(func.value, ast.Name) and \
                    func.value.id == "torch" and node.args and isinstance(node.args[0], ast.Name) and \
                    any(w in node.args[0].id.lower() for w in ("model", "net", "module")):
                saves_module = True
    for site in loads:
        name = bound.get(site.line)
        safe = allowed_everywhere or any(a <= site.line <= b for a, b in allowed)
        site.values["safe_globals"] = safe
        model_name = name is not None and any(w in name.lower() for w in ("model", "net", "module"))
        site.values["loads_whole_model"] = not safe and name is not None and (
            name in used_as_module or (saves_module and model_name))
