"""The parsed-catalog cache: a hit gives the same rules, and any change to a rule file is a miss."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog, rulecache
from gpudoctor.catalog.catalog import builtin_rules_dir
from gpudoctor.catalog.rulefile import RuleFileError


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(where))
    monkeypatch.delenv("GPUDOCTOR_NO_CACHE", raising=False)
    return where


def _fingerprint(catalog) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(r.code, tuple(w.condition.text for w in r.whens), tuple(w.message.text for w in r.whens))
            for r in catalog]


def _copy_rule(tmp_path: Path, code: str) -> tuple[Path, Path]:
    user = tmp_path / "user_rules"
    user.mkdir()
    source = next(builtin_rules_dir().glob(f"{code}-*.md"))
    return user, Path(shutil.copy(source, user / source.name))


def test_second_load_comes_from_the_cache_and_equals_a_fresh_parse(cache: Path, monkeypatch) -> None:
    first = load_catalog()
    files = list(cache.glob("catalog-*.pickle"))
    assert len(files) == 1
    calls = []
    monkeypatch.setattr("gpudoctor.catalog.catalog._parse_rules", lambda f: calls.append(f) or {})
    second = load_catalog()
    assert calls == []  # a hit: nothing parsed
    assert _fingerprint(second) == _fingerprint(first)
    monkeypatch.undo()
    monkeypatch.setenv("GPUDOCTOR_NO_CACHE", "1")
    assert _fingerprint(load_catalog()) == _fingerprint(first)


def test_an_edited_rule_file_is_parsed_again(cache: Path, tmp_path: Path) -> None:
    user, path = _copy_rule(tmp_path, "GD102")
    before = load_catalog([user]).get("GD102")
    assert before is not None
    text = path.read_text()
    old = before.whens[0].message.text
    path.write_text(text.replace(old, old + " (edited)", 1))
    after = load_catalog([user]).get("GD102")
    assert after is not None and after.whens[0].message.text == old + " (edited)"


def test_a_broken_rule_file_still_raises_after_a_cached_load(cache: Path, tmp_path: Path) -> None:
    user, path = _copy_rule(tmp_path, "GD102")
    load_catalog([user])
    path.write_text(path.read_text().replace('condition = "', 'condition = "__import__(1) and ', 1))
    with pytest.raises(RuleFileError):
        load_catalog([user])


def test_an_untrusted_or_corrupt_cache_file_is_a_miss(cache: Path) -> None:
    good = _fingerprint(load_catalog())
    (path,) = cache.glob("catalog-*.pickle")
    os.chmod(path, 0o666)
    assert rulecache.load_cached([builtin_rules_dir()], b"any") is None
    key = rulecache.catalog_key([])
    assert rulecache.load_cached([builtin_rules_dir()], key) is None
    path.write_bytes(b"not a pickle")
    os.chmod(path, 0o600)
    assert _fingerprint(load_catalog()) == good  # parsed again, and stored again
    assert path.read_bytes() != b"not a pickle"


def test_an_unwritable_cache_directory_leaves_the_run_uncached(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(blocker / "cache"))  # a path under a regular file
    assert len(load_catalog()) > 0
