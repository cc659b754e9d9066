"""What the deployment file that sets an NCCL transport switch asks of the hardware (GD805).

``NCCL_IB_DISABLE=1`` costs bandwidth only where the job has InfiniBand/RoCE to lose, and
``NCCL_P2P_DISABLE=1``, ``NCCL_SHM_DISABLE=1`` or ``NCCL_NVLS_ENABLE=0`` only where ranks on one
node share more than one GPU. Both are written, when at all, in the same file as the variable: the
devices a Kubernetes container or a ``docker run`` requests, the ranks a launcher starts per node.
This module reads them and adds two facts to every ``deploy.env`` site of the file:

``gpus_requested``: the most GPUs per node a resource, a ``docker run`` or a launcher of the file
asks for as a literal (``nvidia.com/gpu: 8``, ``--gpus 4``, ``torchrun --nproc_per_node 8``,
``deepspeed --num_gpus 8``, ``mpirun -npernode 8``, ``CUDA_VISIBLE_DEVICES=0,1``, Slurm's
``#SBATCH --gpus-per-node=8`` / ``--gres=gpu:8``); -1 for all the
node's GPUs (``--gpus all``, compose ``count: all``, ``--nproc_per_node gpu``); 0 when nothing is
written or the count is a variable.

``rdma_requested``: the file asks for an RDMA device (``/dev/infiniband``, a ``rdma/…`` or
``nvidia.com/mlnxnics`` resource) or names the InfiniBand adapters NCCL should use
(``NCCL_IB_HCA``). Comments are not read ("used to disable infiniband" is no request), except
Slurm's ``#SBATCH`` directives.

It only reads the file's text and the sites its checker already made; it judges nothing.
"""

from __future__ import annotations

import re

from gpudoctor.static.sites import FileResult

#: ``option value`` or ``option=value`` of the options that give GPUs (or ranks, one GPU each) per node
_GPU_OPTION_RE = re.compile(
    r"(?:^|[\s\[,\"'])(?:--gpus|--nproc[_-]per[_-]node|--num[_-]gpus|--num[_-]processes|-npernode|--npernode"
    r"|--ntasks-per-node|--gpus-per-node)[\"']?(?:=|\s+|[\"']?\s*,\s*[\"']?)[\"']*([\w.=-]+(?:,\d+)*)")
_VISIBLE_RE = re.compile(r"CUDA_VISIBLE_DEVICES[\"']?\s*[=:]\s*[\"']?([0-9][0-9,]*)")
_RESOURCE_RE = re.compile(r"(?:nvidia\.com/gpu|amd\.com/gpu)[\"']?\s*:\s*[\"']?(\d+)")
_GRES_RE = re.compile(r"--gres[=\s]+(?:\S*,)?gpu(?::[\w-]+)?:(\d+)")
_COUNT_ALL_RE = re.compile(r"^\s*count\s*:\s*[\"']?all\b", re.M)
_RDMA_RE = re.compile(r"/dev/infiniband|(?:^|[\s\"'])rdma/[\w.-]+[\"']?\s*:|nvidia\.com/mlnxnics|\bNCCL_IB_HCA\b")


def _code_text(text: str) -> str:
    """The text with ``#`` comment lines and trailing ``  # …`` comments dropped (shell, Dockerfile, YAML)."""
    lines = []
    for raw in text.splitlines():
        if raw.lstrip().startswith("#") and not raw.lstrip().startswith("#SBATCH"):  # Slurm's directives count
            continue
        lines.append(re.sub(r"\s#\s.*$", "", raw))
    return "\n".join(lines)


def _option_count(value: str) -> int:
    """``8`` → 8, ``all`` / ``gpu`` → -1, ``"device=0,1"`` → 2, anything else (``$NGPU``) → 0."""
    value = value.strip("\"'")
    if value.isdigit():
        return int(value)
    if value in ("all", "gpu"):
        return -1
    if value.startswith("device="):
        return len([d for d in value[len("device="):].split(",") if d.strip()])
    return 0


def gpus_requested(result: FileResult, text: str) -> int:
    """The most GPUs per node the file asks for (see the module docstring); -1 wins over any count."""
    code = _code_text(text)
    counts = [_option_count(m.group(1)) for m in _GPU_OPTION_RE.finditer(code)]
    counts += [len([d for d in m.group(1).split(",") if d.strip()]) for m in _VISIBLE_RE.finditer(code)]
    counts += [int(m.group(1)) for m in _RESOURCE_RE.finditer(code)]
    counts += [int(m.group(1)) for m in _GRES_RE.finditer(code)]
    if _COUNT_ALL_RE.search(code):
        counts.append(-1)
    for site in result.sites:
        if site.scope == "k8s.container":
            counts += [v for v in (site.values.get("gpu_requests"), site.values.get("gpu_limits")) if isinstance(v, int)]
        elif site.scope == "deploy.rank_workers":
            ranks = site.values.get("ranks_per_node")
            counts.append(ranks if isinstance(ranks, int) and ranks > 0 else 0)  # -1 there: not a literal
    if -1 in counts:
        return -1
    return max(counts, default=0)


def rdma_requested(text: str) -> bool:
    """Whether the file asks for an RDMA device or names InfiniBand adapters for NCCL."""
    return bool(_RDMA_RE.search(_code_text(text)))


def add_transport_needs(result: FileResult, text: str) -> None:
    """Add ``gpus_requested`` and ``rdma_requested`` to every ``deploy.env`` site of the file."""
    env_sites = [s for s in result.sites if s.scope == "deploy.env"]
    if not env_sites:
        return
    gpus, rdma = gpus_requested(result, text), rdma_requested(text)
    for site in env_sites:
        site.values["gpus_requested"] = gpus
        site.values["rdma_requested"] = rdma
