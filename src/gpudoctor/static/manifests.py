"""Checks Kubernetes manifests and Docker Compose files (multi-document YAML, with line numbers).

YAML is composed into nodes (``yaml.compose_all`` with the safe loader) rather than loaded into
dicts, so every site keeps its line and column. A pod spec is any mapping with a ``containers``
list — which covers Pods, Deployments, Jobs, CronJobs and CRDs such as Kubeflow's PyTorchJob.
Anything that is neither a manifest nor a compose file (CI configs…) is skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from gpudoctor.static.deploy import env_site, launch_sites, size_mib
from gpudoctor.static.launchranks import add_rank_workers, cpu_count
from gpudoctor.static.sites import FileResult

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
_MAX_DEPTH = 12

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _scalar(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


class _TooManyNodes(Exception):
    """The file's aliases make it visit more nodes than :data:`MAX_NODE_VISITS`."""


#: Sequence items one file may make the checker visit (aliases can repeat one list everywhere).
MAX_NODE_VISITS = 200_000
#: Sites one manifest may produce before the walk stops (the runner judges at most 5000 per file).
MAX_MANIFEST_SITES = 5000
_walk: list[Any] = [0, None]  # [items visited, the FileResult being filled]


def _items(node: yaml.Node | None) -> list[yaml.Node]:
    if not isinstance(node, yaml.SequenceNode):
        return []
    _walk[0] += len(node.value)
    if _walk[0] > MAX_NODE_VISITS or (_walk[1] is not None and len(_walk[1].sites) >= MAX_MANIFEST_SITES):
        raise _TooManyNodes
    return list(node.value)


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _count(text: str | None) -> int:
    try:
        return int(float(text)) if text is not None else 0
    except ValueError:
        return -1


def check_yaml(result: FileResult, text: str) -> None:
    _walk[:] = [0, result]
    try:
        _check_documents(result, text)
    except _TooManyNodes:
        result.error("too-complex", f"more than {MAX_NODE_VISITS} list items or {MAX_MANIFEST_SITES} settings "
                     "(aliases can repeat one list everywhere); the rest was not checked")
    finally:
        _walk[:] = [0, None]


def _check_documents(result: FileResult, text: str) -> None:
    try:
        documents = list(yaml.compose_all(text, Loader=_Loader))
    except RecursionError:  # the pure-Python loader (no libyaml) recurses once per nesting level
        result.error("yaml-error", "nested too deeply")
        return
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        result.error("yaml-error", str(getattr(exc, "problem", None) or exc).split("\n")[0], line)
        return
    for doc in documents:
        if not isinstance(doc, yaml.MappingNode):
            continue
        if _get(doc, "apiVersion") is not None and _get(doc, "kind") is not None:
            result.kind = "k8s"
            seen: set[int] = set()  # YAML aliases share nodes: each is visited once (an alias bomb hung check)
            for pod in _pod_specs(doc, 0, seen):
                _pod(result, pod, seen)
        elif isinstance(_get(doc, "services"), yaml.MappingNode):
            result.kind = "compose"
            services = _get(doc, "services")
            assert isinstance(services, yaml.MappingNode)
            for key, service in services.value:
                _service(result, key, service)


def _pod_specs(node: yaml.Node, depth: int, seen: set[int]) -> Iterator[yaml.MappingNode]:
    if depth > _MAX_DEPTH or not isinstance(node, yaml.MappingNode) or id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(_get(node, "containers"), yaml.SequenceNode):
        yield node
        return
    for _, value in node.value:
        yield from _pod_specs(value, depth + 1, seen)


def _pod(result: FileResult, pod: yaml.MappingNode, seen: set[int]) -> None:
    shm_volumes: dict[str, int] = {}
    for volume in _items(_get(pod, "volumes")):
        empty_dir = _get(volume, "emptyDir")
        if _scalar(_get(empty_dir, "medium")) == "Memory":
            limit = _scalar(_get(empty_dir, "sizeLimit"))
            shm_volumes[_scalar(_get(volume, "name")) or ""] = size_mib(limit) if limit else -1
    host_ipc = _scalar(_get(pod, "hostIPC")) in ("true", "True")
    gpu_pod, shm_mounted, shm_size = False, False, -1
    for container in _items(_get(pod, "containers")) + _items(_get(pod, "initContainers")):
        if id(container) in seen:  # the same container node reached again through an alias
            continue
        seen.add(id(container))
        line, col = _pos(container)
        name = _scalar(_get(container, "name")) or "?"
        resources = _get(container, "resources")
        requests = max((_count(_scalar(_get(_get(resources, "requests"), r))) for r in GPU_RESOURCES), default=0)
        limits = max((_count(_scalar(_get(_get(resources, "limits"), r))) for r in GPU_RESOURCES), default=0)
        gpu_pod = gpu_pod or requests > 0 or limits > 0
        result.add("k8s.container", line, col, label=name, container=name, gpu_requests=requests, gpu_limits=limits)
        for env in _items(_get(container, "env")):
            env_name, value = _scalar(_get(env, "name")), _scalar(_get(env, "value"))
            if env_name is not None:
                env_site(result, *_pos(env), env_name, value or "")
        command: list[str] = []
        for key in ("command", "args"):
            words = [_scalar(n) or "" for n in _items(_get(container, key))]
            if words:
                launch_sites(result, _pos(_get(container, key))[0], " ".join(words))
                command.extend(words)
        if command:
            add_rank_workers(result, line, col, f"container {name}", " ".join(command),
                             cpu_count(_scalar(_get(_get(resources, "limits"), "cpu"))))
        for mount in _items(_get(container, "volumeMounts")):
            if _scalar(_get(mount, "mountPath")) == "/dev/shm" and _scalar(_get(mount, "name")) in shm_volumes:
                shm_mounted = True
                shm_size = shm_volumes[_scalar(_get(mount, "name")) or ""]
    containers = _get(pod, "containers")
    assert containers is not None
    line, col = _pos(containers)
    result.add("deploy.shm", line, col, label="pod", workload="Kubernetes pod", gpu=gpu_pod,
               shm_configured=shm_mounted or host_ipc, shm_size_mib=shm_size, ipc_host=host_ipc)


def _service(result: FileResult, key: yaml.Node, service: yaml.Node) -> None:
    name = _scalar(key) or "?"
    line, col = _pos(key)
    runtime = _scalar(_get(service, "runtime")) == "nvidia"
    devices = _items(_get(_get(_get(_get(service, "deploy"), "resources"), "reservations"), "devices"))
    gpu = runtime or _get(service, "gpus") is not None or any(
        _scalar(_get(d, "driver")) == "nvidia" or "gpu" in [_scalar(c) for c in _items(_get(d, "capabilities"))]
        for d in devices)
    shm_text = _scalar(_get(service, "shm_size"))
    ipc_host = _scalar(_get(service, "ipc")) == "host"
    tmpfs_shm = any("/dev/shm" in (_scalar(v) or "") for v in _items(_get(service, "tmpfs")) +
                    _items(_get(service, "volumes")))
    result.add("deploy.shm", line, col, label=name, workload=f"compose service {name}", gpu=gpu,
               shm_configured=bool(shm_text) or ipc_host or tmpfs_shm,
               shm_size_mib=size_mib(shm_text) if shm_text else -1, ipc_host=ipc_host)
    environment = _get(service, "environment")
    if isinstance(environment, yaml.MappingNode):
        for k, v in environment.value:
            env_site(result, *_pos(k), _scalar(k) or "", _scalar(v) or "")
    for item in _items(environment):
        text = _scalar(item) or ""
        env_name, _, value = text.partition("=")
        env_site(result, *_pos(item), env_name, value)
    cpus = cpu_count(_scalar(_get(service, "cpus")) or
                     _scalar(_get(_get(_get(_get(service, "deploy"), "resources"), "limits"), "cpus")))
    for cmd_key in ("command", "entrypoint"):
        node = _get(service, cmd_key)
        if node is not None:
            text = _scalar(node) or " ".join(_scalar(n) or "" for n in _items(node))
            launch_sites(result, _pos(node)[0], text)
            add_rank_workers(result, line, col, f"compose service {name}", text, cpus)
