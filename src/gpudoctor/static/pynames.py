"""Name resolution and small AST helpers for the Python checker.

``import torch as t`` and ``from torch.utils.data import DataLoader as DL`` must not hide a call from
the checker, so every dotted name is resolved through the module's imports before it is matched.
This module only reads the AST; it never imports the code it looks at (and never imports torch).
"""

from __future__ import annotations

import ast

#: torch factory functions that build a tensor on the CPU unless given ``device=``.
#: Factories whose result could have been made on the GPU directly (``device=``): shapes and fills.
TENSOR_FACTORIES = frozenset(
    f"torch.{n}" for n in ("zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "linspace", "eye")
)
#: Factories that copy values they are given: a constant only when those values are literals
#: (``torch.tensor([1.0] * 10)``); ``torch.tensor(rewards)``, ``torch.from_numpy(obs)`` or
#: ``torch.stack(results)`` bring data that lives on the host and has to be copied (pytorch/examples'
#: RL scripts), which GD308's fix (make it on the device) cannot remove.
VALUE_FACTORIES = frozenset(f"torch.{n}" for n in ("tensor", "as_tensor"))
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
#: Calls a ``__getitem__`` may make and still only hand out data it holds (no decoding, no augmentation).
_INDEXING_CALLS = frozenset({"len", "int", "float", "tuple", "list", "dict", "torch.tensor", "torch.as_tensor",
                             "torch.from_numpy", "numpy.asarray", "numpy.array"})
_INDEXING_METHODS = frozenset({"float", "long", "int", "half", "bfloat16", "clone", "contiguous", "view",
                               "reshape", "squeeze", "unsqueeze", "get"})
DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                           "torch.nn.parallel.data_parallel.DataParallel"})
DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.DDP",
                 "torch.nn.parallel.distributed.DistributedDataParallel"})
#: Calls that move tensors between ranks through the process group (collectives, FSDP wrappers):
#: what a gloo backend makes slow for CUDA tensors. An RPC-only or barrier-only group is not slowed.
COLLECTIVES = frozenset({f"torch.distributed.{n}" for n in (
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
    "reduce", "all_to_all", "all_to_all_single", "fsdp.FullyShardedDataParallel", "fsdp.fully_shard",
    "_composable.fsdp.fully_shard")})
DISTRIBUTED_SAMPLER = frozenset({"torch.utils.data.DistributedSampler",
                                 "torch.utils.data.distributed.DistributedSampler"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast",
                      "torch.cpu.amp.autocast", "torch.amp.autocast_mode.autocast"})
GRAD_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.GradScaler"})
CONV_LAYERS = frozenset(f"torch.nn.{n}" for n in ("Conv1d", "Conv2d", "Conv3d", "LazyConv2d"))
BATCHNORM_LAYERS = frozenset(f"torch.nn.{n}" for n in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                                                        "SyncBatchNorm", "LazyBatchNorm2d"))
SYNC_METHODS = {"item": "item", "cpu": "cpu", "tolist": "tolist", "numpy": "numpy"}
GRAPH_BREAK_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
#: Calls that read a whole data file into memory at once (np.load without mmap_mode, pandas readers).
WHOLE_FILE_READERS = frozenset({"numpy.load", "pandas.read_csv", "pandas.read_parquet", "pandas.read_json",
                                "pandas.read_feather", "pandas.read_pickle", "numpy.loadtxt", "numpy.genfromtxt"})
#: The public names of the deprecated ``torch.cuda.amp`` namespace.
DEPRECATED_AMP_NAMES = frozenset({"autocast", "GradScaler", "custom_fwd", "custom_bwd"})
#: what compiles a model: ``torch.compile`` (call or decorator) and Dynamo's older entry point
COMPILE_CALLS = frozenset({"torch.compile", "torch._dynamo.optimize"})
OPTIMIZER_PREFIX = "torch.optim."
DEPRECATED_AMP_PREFIX = "torch.cuda.amp."


def normalize(qualname: str) -> str:
    """Map common re-export spellings to one canonical name (``torch.nn.modules.conv.Conv2d`` …)."""
    if qualname.startswith("torch.nn.modules."):
        parts = qualname.split(".")
        return "torch.nn." + parts[-1]
    if qualname.startswith("np."):
        return "numpy." + qualname[3:]
    if qualname.startswith("pd."):
        return "pandas." + qualname[3:]
    return qualname


class Names:
    """The module's import aliases: local name → fully qualified dotted name."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def add_import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                self.aliases[head] = head

    def add_import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for alias in node.names:
            if alias.name != "*":
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """``t.nn.Conv2d`` → ``torch.nn.Conv2d``; None for anything that is not a dotted name."""
        parts = dotted_parts(node)
        if parts is None:
            return None
        parts[0] = self.aliases.get(parts[0], parts[0])
        return normalize(".".join(parts))

    def matches(self, node: ast.AST, names: frozenset[str]) -> bool:
        """Whether ``node`` names one of ``names`` (a bare, unimported last part matches too)."""
        return self.is_one_of(self.qualname(node), names)

    def is_one_of(self, qual: str | None, names: frozenset[str]) -> bool:
        """Like :meth:`matches` for an already resolved name (the walker resolves each callee once)."""
        if qual is None:
            return False
        if qual in names:
            return True
        if "." not in qual and qual not in self.aliases:  # e.g. after `from torch.utils.data import *`
            return qual in _last_parts(names)
        return False


_LAST_PARTS: dict[frozenset[str], frozenset[str]] = {}


def _last_parts(names: frozenset[str]) -> frozenset[str]:
    cached = _LAST_PARTS.get(names)
    if cached is None:
        cached = _LAST_PARTS[names] = frozenset(n.rsplit(".", 1)[-1] for n in names)
    return cached


def dotted_parts(node: ast.AST) -> list[str] | None:
    """``self.model`` → ``["self", "model"]`` as written (no alias resolved); None for anything that is
    not a name or a chain of attributes on one."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def literal(node: ast.AST | None) -> object:
    """The value of a literal node; ``...`` (Ellipsis) when it is not a plain literal."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ...


def tri_state(node: ast.AST | None) -> str:
    """A boolean keyword's state: ``true`` | ``false`` | ``unset`` | ``dynamic`` (not a literal)."""
    if node is None:
        return "unset"
    value = literal(node)
    if value is ...:
        return "dynamic"
    return "true" if value else "false"


def short(node: ast.AST, limit: int = 60) -> str:
    """Source text of ``node`` on one line, cut to ``limit`` characters."""
    try:
        text = " ".join(ast.unparse(node).split())
    except (ValueError, RecursionError, AttributeError):  # pragma: no cover - exotic nodes
        text = type(node).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def mentions_cuda(node: ast.AST) -> bool:
    """A literal device string that names CUDA (``"cuda"``, ``"cuda:0"``)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def is_loss_scaler_call(call: ast.Call) -> bool:
    """A call that runs backward for the caller: the loop around it trains.

    ``loss_scaler(loss, optimizer, …)`` (timm's / DeiT's / MAE's ``NativeScaler`` object runs
    ``scaler.scale(loss).backward()`` and the step inside) and any other callable handed the loss as
    its first argument and the optimizer beside it (``backward_and_step(loss, optimizer)``,
    ``self.amp_step(loss, self.optimizer)``): a call of an object whose name ends in ``scaler`` with at
    least two positional arguments (not ``scaler.scale(loss)`` or ``GradScaler()``), or a first
    positional argument named as a loss (``loss``, ``total_loss``) with an argument named as an
    optimizer (``optimizer``, ``self.optim``). Callees that save, log or print what they are given
    (``save_checkpoint(loss, optimizer)``) are no step."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    lowered = name.lower()
    if lowered.endswith("scaler") and not name[:1].isupper() and len(call.args) >= 2:
        return True
    if not call.args or not _named(call.args[0], "loss") or any(w in lowered for w in _NOT_A_STEP):
        return False
    return any(_named(a, "optim") for a in (*call.args[1:], *(k.value for k in call.keywords)))


#: Words in a callee's name that say it records what it is handed rather than stepping with it.
_NOT_A_STEP = ("save", "checkpoint", "ckpt", "log", "print", "write", "dump", "record", "track", "report")


def _named(node: ast.AST, word: str) -> bool:
    """A plain name or attribute (``loss``, ``self.optimizer``) whose last part contains ``word``."""
    text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return word in text.lower()


def test_traits(node: ast.AST) -> tuple[bool, bool]:
    """For an ``if`` test: (periodic — has ``%``, e.g. ``step % 100 == 0``; guards on the rank)."""
    periodic = rank = False
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod):
            periodic = True
        elif isinstance(n, ast.Name):
            rank = rank or "rank" in n.id.lower() or "main_process" in n.id.lower()
        elif isinstance(n, ast.Attribute):
            rank = rank or "rank" in n.attr or "main_process" in n.attr
    return periodic, rank


#: What an ``if`` test that picks code per operating system mentions (``sys.platform == "win32"``,
#: ``os.name == "nt"``, ``platform.system() == "Windows"``).
_PLATFORM_WORDS = frozenset({"win32", "nt", "windows", "darwin", "cygwin"})


def tests_platform(node: ast.AST) -> bool:
    """Whether an ``if`` test picks code by operating system: on Windows only gloo exists, so a gloo
    process group chosen there is no mistake (pytorch/examples ``distributed/ddp/example.py``)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("platform", "name", "system") and \
                isinstance(n.value, ast.Name) and n.value.id in ("sys", "os", "platform"):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lower() in _PLATFORM_WORDS:
            return True
    return False


def is_literal_expr(node: ast.AST) -> bool:
    """Whether ``node`` is built from literals alone (``[1.0] * 10``, ``(0.5, 0.5)``, ``[[1, 2], [3, 4]]``)."""
    return all(isinstance(n, (ast.Constant, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
                              ast.expr_context)) for n in ast.walk(node))


def has_main_guard(tree: ast.Module) -> bool:
    """Whether the module has an ``if __name__ == "__main__":`` block at its top level."""
    return any(isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and isinstance(stmt.test.left, ast.Name)
               and stmt.test.left.id == "__name__" for stmt in tree.body)


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def only_indexes(getitem: ast.FunctionDef, names: Names) -> bool:
    """Whether a dataset's ``__getitem__`` only indexes what the object holds.

    Such a dataset hands out a sample by subscripting tensors or lists built once (``return
    self.data[index]``): with ``num_workers=0`` a batch costs the collation only, and worker processes
    would add their start-up and pickling, not take work off the training loop. A ``__getitem__`` that
    calls anything else (``Image.open``, ``self.transform``, a tokenizer, file reads) does more.
    """
    return all((isinstance(c.func, ast.Attribute) and c.func.attr in _INDEXING_METHODS
                and not (isinstance(c.func.value, ast.Name) and c.func.value.id == "self"))
               or names.qualname(c.func) in _INDEXING_CALLS
               for c in ast.walk(getitem) if isinstance(c, ast.Call))
