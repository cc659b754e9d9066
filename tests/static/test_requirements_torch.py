"""GD807 reads pip requirements files: an open torch there is info, a nightly one warns, a pin is silent."""

from __future__ import annotations

from pathlib import Path

import pytest
from static_helpers import check_findings

from gpudoctor.model import Severity
from gpudoctor.static.files import classify


def _gd807(path: Path) -> list[tuple[int, Severity]]:
    return sorted((f.location.line or 0, f.severity) for f in check_findings([path]) if f.code == "GD807")


def test_unpinned_torch_in_requirements_is_info(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("# training\nnumpy\ntorch  # any\ntorchvision>=0.19\n")
    assert _gd807(req) == [(3, Severity.INFO)]


def test_pinned_torch_in_requirements_is_silent(tmp_path: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("-r base-requirements.txt\ntorch==2.4.0\ntorchvision==0.19.0\n")
    assert _gd807(req) == []


def test_nightly_torch_in_requirements_warns(tmp_path: Path) -> None:
    req = tmp_path / "requirements-nightly.txt"
    req.write_text("--pre\n--index-url https://download.pytorch.org/whl/nightly/cu124\ntorch\n")
    assert _gd807(req) == [(3, Severity.WARNING)]


@pytest.mark.parametrize(("name", "kind"), [("requirements.txt", "requirements"), ("requirements-dev.txt", "requirements"),
                                            ("test_requirements.txt", "requirements"), ("notes.txt", None)])
def test_requirements_files_are_classified(name: str, kind: str | None) -> None:
    assert classify(Path(name)) == kind
