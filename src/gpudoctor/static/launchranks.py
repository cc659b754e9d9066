"""Ranks per node × DataLoader workers against the CPUs a manifest gives the container (issue 34).

A Kubernetes container or compose service whose command starts several ranks per node (``torchrun
--nproc_per_node 8 train.py``, ``deepspeed --num_gpus 8 train.py``, ``accelerate launch --num_processes
8 train.py``) and whose CPU limit is written in the same manifest (``resources.limits.cpu``, compose
``cpus`` / ``deploy.resources.limits.cpus``) yields a ``deploy.rank_workers`` site. The runner
(:func:`join_rank_workers`) finds the script among the checked Python files and adds the literal
``num_workers`` of its DataLoaders: each rank runs its own main process and ``num_workers`` worker
processes, so ``ranks × (workers + 1)`` busy processes share the CPUs. When the CPU limit, the rank count,
the script or its workers are not knowable from the files, the site says so and no rule fires.
"""

from __future__ import annotations

import os
import shlex

from gpudoctor.static.sites import FileResult

#: launcher word → the options that give ranks per node
_RANK_OPTIONS = {"torchrun": ("--nproc_per_node", "--nproc-per-node"),
                 "torch.distributed.run": ("--nproc_per_node", "--nproc-per-node"),
                 "deepspeed": ("--num_gpus", "--num-gpus"),
                 "accelerate": ("--num_processes", "--num-processes")}


def cpu_count(text: str | None) -> float:
    """A CPU quantity (``"8"``, ``"7.5"``, ``"8000m"``, compose ``"4.0"``); -1 when absent or not a number."""
    if text is None:
        return -1.0
    text = text.strip().strip("'\"")
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return -1.0


def rank_launch(command: str) -> tuple[str, int, str] | None:
    """(launcher, ranks per node, script) for a command that starts several ranks per node, or None.
    ``ranks`` is -1 when the option is not a literal number (``--nproc_per_node=$GPUS``); ``script``
    is the first ``.py`` word after the launcher ("" when none)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    words = [w for word in words for w in word.split()]  # bash -c 'torchrun …': the quoted command's words
    for i, word in enumerate(words):
        launcher = os.path.basename(word)
        if launcher not in _RANK_OPTIONS or launcher == "torch.distributed.run" and not (i and words[i - 1] == "-m"):
            continue
        options = _RANK_OPTIONS[launcher]
        ranks, script = 0, ""
        rest = words[i + 1:]
        for j, arg in enumerate(rest):
            key, eq, value = arg.partition("=")
            if key in options:
                value = value if eq else (rest[j + 1] if j + 1 < len(rest) else "")
                ranks = int(value) if value.isdigit() else -1
            elif arg.endswith(".py") and not script:
                script = arg
                break
        if ranks:
            return launcher, ranks, script
    return None


def add_rank_workers(result: FileResult, line: int, col: int, workload: str, command: str, cpus: float) -> None:
    launch = rank_launch(command)
    if launch is None:
        return
    launcher, ranks, script = launch
    result.add("deploy.rank_workers", line, col, label=workload, launch_workload=workload, rank_launcher=launcher,
               ranks_per_node=ranks, script=script, cpu_limit=cpus, workers_per_rank=-1, script_found=False, script_path="",
               rank_processes=-1)


def _match(python_paths: list[str], manifest_path: str, script: str) -> str | None:
    """The checked file the command's script is: the path beside the manifest, else the one file whose
    trailing path parts match most of the script's (``/workspace/train.py`` in the image is the checked
    ``train.py`` that was copied there); None when no file or several match equally."""
    beside = os.path.normpath(os.path.join(os.path.dirname(manifest_path), script))
    if beside in python_paths:
        return beside
    parts = [p for p in script.split("/") if p and p != "."]

    def score(path: str) -> int:
        mine = os.path.normpath(path).split(os.sep)
        n = 0
        while n < min(len(parts), len(mine)) and parts[-1 - n] == mine[-1 - n]:
            n += 1
        return n

    scored = sorted(((score(p), p) for p in python_paths), reverse=True)
    if not scored or scored[0][0] == 0 or len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


def join_rank_workers(results: list[FileResult]) -> None:
    """Fill ``workers_per_rank`` and ``script_found`` of every ``deploy.rank_workers`` site from the
    checked script it launches: the most workers a DataLoader of it asks for as a literal (-1: none
    literal, or no DataLoader)."""
    python = {os.path.normpath(r.path): r for r in results if r.kind == "python"}
    paths = list(python)
    for result in results:
        for site in result.sites:
            if site.scope != "deploy.rank_workers" or not site.values.get("script"):
                continue
            match = _match(paths, result.path, str(site.values["script"]))
            if match is None:
                continue
            script_file = python[match]
            workers = [n for n in (s.values.get("num_workers") for s in script_file.sites if s.scope == "python.dataloader")
                       if isinstance(n, int) and n >= 0]
            site.values["script_found"] = True
            site.values["script_path"] = script_file.path
            site.values["workers_per_rank"] = per_rank = max(workers) if workers else -1
            ranks = site.values.get("ranks_per_node", -1)
            if per_rank >= 0 and isinstance(ranks, int) and ranks > 0:
                site.values["rank_processes"] = ranks * (per_rank + 1)
