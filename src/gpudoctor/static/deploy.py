"""Checks Dockerfiles and shell launch scripts: base images, baked-in environment, launchers, shm.

Like the Python checker it records sites with facts (``deploy.env`` for every GPU/NCCL/CUDA
variable set, ``docker.base_image``, ``docker.entrypoint``, ``deploy.shm`` for each ``docker run``
of a GPU container, ``launch.command`` for launchers) and leaves judgement to the rule files.
Dockerfile heredoc bodies (``COPY <<EOT``, ``RUN <<EOF``) are content, not instructions, and
``ARG`` defaults are substituted into ``FROM`` so that ``FROM image:${TAG}`` is judged by its tag.
YAML (Compose, Kubernetes) lives in :mod:`gpudoctor.static.manifests`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator

from gpudoctor.static.dockerinstall import torch_install_sites
from gpudoctor.static.sites import FileResult

#: Environment variables worth a site (the rules look at a few of them; the rest are cheap context).
ENV_PREFIXES = ("NCCL_", "CUDA_", "NVIDIA_", "TORCH_", "PYTORCH_", "OMP_")
GPU_IMAGE_HINTS = ("cuda", "pytorch", "nvidia", "nvcr.io", "torch", "cudnn")
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate launch", "deepspeed")
_ENV_ASSIGN_RE = re.compile(r"(?:^|\s)(?:export\s+)?([A-Z][A-Z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)")
#: ``<<EOT``, ``<<-EOT``, ``<<"EOT"`` after a blank (not the shell's ``1<<2``): group 1 is ``-``, 2 the word.
_HEREDOC_RE = re.compile(r"(?:^|\s)<<(-?)[\"']?([A-Za-z_][\w.-]*)[\"']?")
#: A variable whose default holds no other variable (``${B:-${A}}`` is substituted inside out).
_VAR_RE = re.compile(r"\$\{([A-Za-z_]\w*)(?::-([^${}]*))?\}|\$([A-Za-z_]\w*)")
#: Rounds of substitution for nested defaults (``${C:-${B:-${A}}}``); deeper nesting stays a variable.
_MAX_NESTING = 8
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?$", re.I)


def size_mib(text: str) -> int:
    """``16g`` / ``512Mi`` / ``8G`` → MiB; -1 when it cannot be read."""
    match = _SIZE_RE.match(text.strip().strip("\"'"))
    if not match:
        return -1
    number, unit = float(match.group(1)), match.group(2).lower()
    factor = {"": 1 / 1048576, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[unit]
    return int(number * factor)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined, comments dropped; yields (first line number, text)."""
    start, parts = 0, list[str]()
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not parts:
            start = number
            if not stripped or stripped.startswith("#"):
                continue
        elif stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def env_site(result: FileResult, line: int, col: int, name: str, value: str) -> None:
    if name.startswith(ENV_PREFIXES):
        result.add("deploy.env", line, col, label=name, name=name, value=value.strip("\"'"))


def launch_sites(result: FileResult, line: int, text: str) -> None:
    if "torch.distributed.launch" in text:
        col = text.find("torch.distributed.launch") + 1
        result.add("launch.command", line, col, launcher="torch.distributed.launch", command=text[:80])


def _runs_launcher(text: str) -> bool:
    return any(launcher in text for launcher in LAUNCHERS)


def check_dockerfile(result: FileResult, text: str) -> None:
    stages: set[str] = set()
    args: dict[str, str] = {}  # ARG defaults seen so far (global and per stage): FROM image:${TAG}
    for line, content, heredoc_body in dockerfile_instructions(text):
        instruction, _, rest = content.partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "ARG":
            for name, value in _env_pairs(rest):
                if value or name not in args:  # `ARG TAG` in a stage keeps the global default
                    args[name] = _substitute(value.strip("\"'"), args)  # ARG C=${B:-${A}}: as Docker expands it
        elif instruction == "FROM":
            _from(result, line, rest, stages, args)
        elif instruction == "ENV":
            for name, value in _env_pairs(rest):
                env_site(result, line, 1, name, value)
        elif instruction in ("CMD", "ENTRYPOINT"):
            _entrypoint(result, line, instruction, rest)
        elif instruction == "RUN":
            launch_sites(result, line, rest)
            torch_install_sites(result, line, _substitute(rest, args))
            for number, body_line in heredoc_body:  # a RUN heredoc is a script: its own lines
                launch_sites(result, number, body_line.strip())
                torch_install_sites(result, number, _substitute(body_line.strip(), args))


def dockerfile_instructions(text: str) -> Iterator[tuple[int, str, list[tuple[int, str]]]]:
    """Instructions as ``(first line, joined text, heredoc body as (line, text))``.

    Lines of a heredoc body (``COPY <<EOT /etc/x`` … ``EOT``, ``RUN <<EOF`` … ``EOF``; BuildKit syntax)
    are content, not instructions: they come back with their instruction, never on their own.
    """
    lines = text.splitlines()
    index, start, parts = 0, 0, list[str]()
    while index < len(lines):
        number, stripped = index + 1, lines[index].strip()
        index += 1
        if not parts:
            start = number
            if not stripped or stripped.startswith("#"):
                continue
        elif stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        content, parts = " ".join(parts), []
        body: list[tuple[int, str]] = []
        for strip_tabs, delimiter in _HEREDOC_RE.findall(content):
            while index < len(lines):
                raw = lines[index]
                index += 1
                if (raw.lstrip("\t") if strip_tabs else raw).rstrip() == delimiter:
                    break
                body.append((index, raw))
        yield start, content, body
    if parts:
        yield start, " ".join(parts), []


def _substitute(text: str, args: dict[str, str]) -> str:
    """``$NAME``, ``${NAME}`` and ``${NAME:-default}`` from known ARG defaults; unknown ones stay."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in args and args[name] != "":
            return args[name]
        if match.group(2) is not None:  # ${NAME:-default}
            return match.group(2)
        return "\0" + match.group(0)[1:]  # unknown: marked so that the next round leaves it alone
    for _ in range(_MAX_NESTING):  # innermost first: ${B:-${A}} hid an unpinned base image
        done = _VAR_RE.sub(value, text)
        if done == text:
            break
        text = done
    return text.replace("\0", "$")
def _env_pairs(rest: str) -> list[tuple[str, str]]:
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    if words and "=" not in words[0]:  # legacy form: ENV NAME value with spaces
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]


def _from(result: FileResult, line: int, rest: str, stages: set[str], args: dict[str, str]) -> None:
    words = [w for w in rest.split() if not w.startswith("--")]
    if not words:
        return
    written = words[0]
    image = _substitute(written, args)
    if len(words) >= 3 and words[1].upper() == "AS":
        stages.add(words[2].lower())
    if image.lower() in stages or image == "scratch":
        return
    name, digest = (image.split("@", 1) + [""])[:2]
    last = name.rsplit("/", 1)[-1]
    repo, tag = (name[: len(name) - len(last)] + last.split(":", 1)[0], last.split(":", 1)[1]) if ":" in last \
        else (name, "")
    if digest:
        state = "digest"
    elif "$" in image:
        state = "variable"
    elif not tag:
        state = "none"
    elif tag == "latest":
        state = "latest"
    elif any(ch.isdigit() for ch in tag):
        state = "version"
    else:
        state = "floating"
    gpu = any(hint in repo.lower() for hint in GPU_IMAGE_HINTS)
    result.add("docker.base_image", line, 1, label=written, image=image, repo=repo, tag=tag, tag_state=state,
               gpu_image=gpu)


def _entrypoint(result: FileResult, line: int, instruction: str, rest: str) -> None:
    form, command = "shell", rest
    if rest.startswith("["):
        try:
            argv = json.loads(rest)
            command = " ".join(str(a) for a in argv)
            form = "exec"
            if len(argv) >= 2 and str(argv[0]).rsplit("/", 1)[-1] in ("sh", "bash") and argv[1] == "-c":
                form, command = "exec-sh-c", " ".join(str(a) for a in argv[2:])
        except (ValueError, TypeError):
            form = "shell"
    uses_exec = command.lstrip().startswith("exec ")
    result.add("docker.entrypoint", line, 1, label=instruction, instruction=instruction, form=form,
               uses_exec=uses_exec, runs_launcher=_runs_launcher(command), command=command[:80])
    launch_sites(result, line, rest)


def heredoc_body_lines(text: str) -> set[int]:
    """Line numbers (1-based) of a shell script's heredoc bodies (``cat > f <<EOF`` … ``EOF``):
    content, not commands — ``export NCCL_P2P_DISABLE=1`` written into a file is not set here."""
    body: set[int] = set()
    pending: list[tuple[str, bool]] = []  # (terminator, tabs stripped) of the heredocs opened on a line
    for number, raw in enumerate(text.splitlines(), start=1):
        if pending:
            word, dash = pending[0]
            if (raw.lstrip("\t") if dash else raw) == word:
                pending.pop(0)
            else:
                body.add(number)
            continue
        if not raw.lstrip().startswith("#"):
            pending = [(m.group(2), m.group(1) == "-") for m in _HEREDOC_RE.finditer(raw)]
    return body


def check_shell(result: FileResult, text: str) -> None:
    bodies = heredoc_body_lines(text)
    for line, content in logical_lines(text):
        if line not in bodies:
            for match in _ENV_ASSIGN_RE.finditer(content):
                env_site(result, line, match.start(1) + 1, match.group(1), match.group(2))
        launch_sites(result, line, content)
        torch_install_sites(result, line, content)
        if re.search(r"\bdocker\s+run\b", content) or re.search(r"\bpodman\s+run\b", content):
            _docker_run(result, line, content)


def _docker_run(result: FileResult, line: int, content: str) -> None:
    try:
        words = shlex.split(content, comments=True)
    except ValueError:
        words = content.split()
    gpu = any(w.startswith("--gpus") or w in ("--runtime=nvidia",) or "nvidia.com/gpu" in w for w in words)
    shm = -1
    ipc_host = False
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word.startswith("--shm-size"):
            shm = size_mib(word.split("=", 1)[1] if "=" in word else following)
        elif word in ("--ipc=host",) or (word == "--ipc" and following == "host"):
            ipc_host = True
    configured = ipc_host or shm != -1 or any("/dev/shm" in w for w in words)
    result.add("deploy.shm", line, 1, label="docker run", workload="docker run", gpu=gpu,
               shm_configured=configured, shm_size_mib=-1 if ipc_host else shm, ipc_host=ipc_host)
