"""One deployment file, given as bytes, to its checker: Dockerfiles and shell launch scripts
(:mod:`gpudoctor.static.deploy`), pip requirements files (:mod:`gpudoctor.static.dockerinstall`) or YAML manifests (:mod:`gpudoctor.static.manifests`, which builds on
the former's site helpers — so the choice between them lives here, above both)."""

from __future__ import annotations

from gpudoctor.static.deploy import check_dockerfile, check_shell
from gpudoctor.static.dockerinstall import check_requirements
from gpudoctor.static.manifests import check_yaml
from gpudoctor.static.sites import FileResult, find_ignores
from gpudoctor.static.transportneeds import add_transport_needs


def check_deploy_file(path: str, kind: str, data: bytes) -> FileResult:
    """Check one Dockerfile, shell script or YAML manifest given as bytes."""
    result = FileResult(path=path, kind=kind)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        result.error("not-utf8", f"cannot decode as UTF-8 at byte {exc.start}")
        text = data.decode("utf-8", errors="replace")
    result.ignores = find_ignores(text)
    if kind == "dockerfile":
        check_dockerfile(result, text)
    elif kind == "shell":
        check_shell(result, text)
    elif kind == "yaml":
        check_yaml(result, text)
    elif kind == "requirements":
        check_requirements(result, text)
    add_transport_needs(result, text)
    return result
