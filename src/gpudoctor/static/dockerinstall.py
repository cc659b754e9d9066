"""The torch that a Dockerfile ``RUN`` or a launch script installs, and whether its version is pinned.

Why this exists: GD801 judges the base image's tag, but most images install torch themselves
(``pip install torch``, ``pip install --pre torch --index-url …/nightly/cu124``, ``torch>=2``), and a
rebuild then brings whatever torch the index serves that day: a new CUDA build, new kernels, new
defaults, or a nightly that changes every night. One site ``deploy.torch_install`` per torch named
on an install command, with how its version is held (``pin_state``; the torches of one command line
that are held alike share one site, since a finding is reported once per line and rule):

- ``pinned``: ``torch==2.5.1`` (or ``===``), ``torch~=2.5.1`` (patch releases only), a wheel URL or
  path (``torch @ https://…``), a conda ``pytorch=2.5.1``;
- ``range``: ``torch>=2``, ``torch<3``, ``torch~=2.5``, ``torch==2.*``: the newest release inside;
- ``none``: ``torch`` alone, or ``pip install -U torch``;
- ``nightly``: not pinned, from a nightly index or with ``--pre``;
- ``variable``: the version comes from a build argument or variable without a default.

A pip requirements file (``requirements*.txt``) is read on its own by :func:`check_requirements`:
one site per torch line, ``installer`` ``pip``, ``file_kind`` ``requirements``. Which Dockerfile
installs it (``pip install -r requirements.txt``) is not followed, and packages installed only as
another package's dependency are not read.
What it must not do: run anything, or decide on a finding (GD807 does).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from gpudoctor.static.sites import FileResult

#: The names torch is installed under (pip; conda's package is ``pytorch``).
TORCH_NAMES = frozenset({"torch", "pytorch"})
#: pip/uv options that take a value as the next word (``-i URL``): their value is no requirement.
_PIP_VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--trusted-host", "--cache-dir",
    "--progress-bar", "--platform", "--python-version", "--implementation", "--abi", "--only-binary",
    "--no-binary", "-C", "--config-settings", "--global-option", "--upgrade-strategy", "--report", "--log",
    "--timeout", "--retries", "--proxy", "--cert", "--client-cert", "--exists-action", "--python", "-p",
    "--index-strategy", "--extra", "--group",
})
#: conda/mamba options that take a value.
_CONDA_VALUE_OPTIONS = frozenset({"-c", "--channel", "-n", "--name", "-p", "--prefix", "--file", "--override-channels"})
_INDEX_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
_REQUIREMENT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


@dataclass(frozen=True)
class TorchInstall:
    """One torch requirement on one install command."""

    package: str
    spec: str          # the version part as written (``>=2``, ``==2.5.1``, ``@ https://…``, "")
    pin_state: str     # pinned | range | none | nightly | variable
    installer: str     # pip | uv | conda
    index: str         # the index or find-links URL given, "" when none
    pre: bool          # --pre


def torch_install_sites(result: FileResult, line: int, text: str) -> None:
    """Add a ``deploy.torch_install`` site for each torch that ``text`` (one shell line or RUN, with
    the Dockerfile's ``ARG`` defaults already substituted: ``torch==${TORCH}``) installs."""
    if "torch" not in text:
        return
    by_state: dict[str, list[TorchInstall]] = {}
    for found in torch_installs(text):
        by_state.setdefault(found.pin_state, []).append(found)
    for state, found_list in by_state.items():  # one site per state: a finding per line and rule
        first = found_list[0]
        label = ", ".join(dict.fromkeys(f"{f.package}{f.spec}" for f in found_list))
        result.add("deploy.torch_install", line, 1, label=label, package=first.package, version_spec=first.spec,
                   pin_state=state, installer=", ".join(dict.fromkeys(f.installer for f in found_list)),
                   index_url=first.index, pre_release=any(f.pre for f in found_list))


def torch_installs(text: str) -> Iterator[TorchInstall]:
    """Every torch requirement of the install commands in one shell command line."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unbalanced quote: judge the words as they split
        words = text.split()
    command: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS:
            yield from _one_command(command)
            command = []
        else:
            command.append(word)


def _one_command(words: list[str]) -> Iterator[TorchInstall]:
    installer, rest = _installer(words)
    if installer is None:
        return
    value_options = _CONDA_VALUE_OPTIONS if installer == "conda" else _PIP_VALUE_OPTIONS
    pre = False
    index = ""
    requirements: list[str] = []
    skip_next = False
    for i, word in enumerate(rest):
        if skip_next:
            skip_next = False
            continue
        option, _, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in _INDEX_OPTIONS:
            url = attached or (rest[i + 1] if i + 1 < len(rest) else "")
            index = index or url
            skip_next = not attached
        elif option in value_options:
            skip_next = not attached
        elif word == "--pre":
            pre = True
        elif not word.startswith("-"):
            requirements.append(word)
    nightly_index = "nightly" in index
    for requirement in requirements:
        match = _REQUIREMENT_RE.match(requirement.strip())
        if match is None or match.group(1).lower() not in TORCH_NAMES:
            continue
        spec = match.group(3).strip()
        state = _conda_state(spec) if installer == "conda" else _pip_state(spec)
        if state in ("none", "range") and (pre or nightly_index):
            state = "nightly"
        yield TorchInstall(match.group(1), spec, state, installer, index, pre)


def _installer(words: list[str]) -> tuple[str | None, list[str]]:
    """Which installer ``words`` run (``pip``, ``python -m pip``, ``uv pip``, ``conda``/``mamba``) and
    the words after ``install``; (None, []) for any other command."""
    for i, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        following = words[i + 1:]
        if re.fullmatch(r"pip[0-9.]*", name):
            kind = "pip"
        elif name == "uv" and following[:1] == ["pip"]:
            kind, following = "uv", following[1:]
        elif re.fullmatch(r"python[0-9.]*", name) and following[:2] == ["-m", "pip"]:
            kind, following = "pip", following[2:]
        elif name in ("conda", "mamba", "micromamba"):
            kind = "conda"
        else:
            continue
        if following[:1] == ["install"]:
            return kind, following[1:]
        return None, []
    return None, []


def _pip_state(spec: str) -> str:
    if not spec:
        return "none"
    if "$" in spec:
        return "variable"
    if spec.startswith("@"):
        return "pinned"
    clauses = [c.strip() for c in spec.split(";", 1)[0].split(",") if c.strip()]
    for clause in clauses:
        if clause.startswith("===") or (clause.startswith("==") and "*" not in clause):
            return "pinned"
        if clause.startswith("~=") and clause[2:].strip().count(".") >= 2:
            return "pinned"
    return "range" if clauses else "none"


def _conda_state(spec: str) -> str:
    """conda's ``pytorch=2.5.1`` / ``pytorch==2.5`` pin; ``pytorch>=2`` is a range."""
    if not spec:
        return "none"
    if "$" in spec:
        return "variable"
    if any(op in spec for op in (">", "<", "!", "*")):
        return "range"
    return "pinned" if any(ch.isdigit() for ch in spec) else "none"



def check_requirements(result: FileResult, text: str) -> None:
    """A ``deploy.torch_install`` site for each torch line of a pip requirements file (``torch``,
    ``torch>=2``, ``torch==2.5.1``, ``torch @ https://…``; options lines such as ``-r other.txt`` and
    ``--index-url`` are not requirements). ``--pre`` or a nightly ``--index-url`` in the file makes an
    unpinned torch a nightly, as on a command line."""
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            lines.append((number, line))
    options = " ".join(line for _, line in lines if line.startswith("-"))
    pre = "--pre" in options.split()
    nightly = "nightly" in options
    for number, line in lines:
        if line.startswith("-"):
            continue
        match = _REQUIREMENT_RE.match(line)
        if match is None or match.group(1).lower() not in TORCH_NAMES:
            continue
        spec = match.group(3).strip()
        state = _pip_state(spec)
        if state in ("none", "range") and (pre or nightly):
            state = "nightly"
        result.add("deploy.torch_install", number, 1, label=f"{match.group(1)}{spec}", package=match.group(1),
                   version_spec=spec, pin_state=state, installer="pip", index_url="", pre_release=pre)
