"""`gpudoctor check` on a corpus of public training repositories, joined against hand labels (issue 34).

Each repository is pinned to a commit (REPOS below) and checked out under /work/corpus/<name>
(outside this repository; other helpers share those checkouts, so this script never deletes or
moves one: a checkout at another commit is an error, not something to fix silently). When a
checkout is missing, it is made from the bare mirror that the `fetch` tool leaves under
/work/.mirror/<owner>+<name>/repo; mirrors can lack their largest blobs, so only the files whose
blobs are present are checked out.

`gpudoctor check --format json --jobs 1 .` runs from each repository root. Every finding is joined
on (repo, path, line, rule) against bench/check_corpus_labels.json, whose entries were written by
reading the code at that line:

    true-act        the problem is real and a reviewer would act on it
    true-not-worth  the claim is literally true but not worth a reviewer's time
    false           the code does not bear the claim out, or following the fix would break the script

The labels file's "missed" list holds real problems a reviewer would flag (repo, path, line, rule);
each counts as found when a finding with that repo, path and rule sits within MISSED_SLACK lines.

Usage:

    python bench/check_corpus.py [--corpus /work/corpus] [--only NAME,...] [--markdown FILE]
                                 [--unlabelled]    # print the findings that have no label yet

Not a unit test: it runs `check` on ~4,000 files (about a minute on the 2-core machine).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE / "check_corpus_labels.json"
MIRRORS = Path("/work/.mirror")
MISSED_SLACK = 3
KINDS = ("true-act", "true-not-worth", "false")
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_test\.py$|(^|/)conftest\.py$")


@dataclass(frozen=True)
class Repo:
    """One corpus repository: checkout name, GitHub owner/name, pinned commit, its style."""

    name: str
    github: str
    commit: str
    style: str


REPOS = (
    Repo("examples", "pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8", "plain loops, DDP"),
    Repo("nanoGPT", "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "single-file LLM, DDP"),
    Repo("accelerate", "huggingface/accelerate", "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83", "accelerate"),
    Repo("litgpt", "Lightning-AI/litgpt", "26857050fe3ff627cd714fe92f5838f51a3d5efa", "Lightning Fabric"),
    Repo(
        "stanford_alpaca",
        "tatsu-lab/stanford_alpaca",
        "761dc5bfbdeeffa89b8bff5d038781a4055f796a",
        "HF Trainer",
    ),
    Repo(
        "DeepSpeedExamples",
        "microsoft/DeepSpeedExamples",
        "83757d9c937daabd1089a08051061706cb73900d",
        "DeepSpeed",
    ),
    Repo(
        "torchtitan",
        "pytorch/torchtitan",
        "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a",
        "distributed framework",
    ),
    Repo(
        "deit", "facebookresearch/deit", "7e160fe43f0252d17191b71cbb5826254114ea5b", "research, many scripts"
    ),
    Repo("mae", "facebookresearch/mae", "efb2a8062c206524e35e47d04501ed4f544c0ae8", "research, many scripts"),
    Repo(
        "modded-nanogpt",
        "KellerJordan/modded-nanogpt",
        "f411b3d346aa52d3504324ca93c230fd84c6c07f",
        "LLM speed-run",
    ),
)


def is_test_path(path: str) -> bool:
    """Whether a repository-relative path is test code by the issue's definition."""
    return bool(_TEST_PATH.search(path))


def _git(repo_dir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo_dir), *args], check=True, capture_output=True, text=True
    ).stdout


def ensure_checkout(repo: Repo, corpus: Path) -> Path:
    """The checkout of `repo` at its pinned commit, made from the fetched mirror when missing."""
    where = corpus / repo.name
    if not where.exists():
        mirror = MIRRORS / repo.github.replace("/", "+") / "repo"
        if not mirror.exists():
            sys.exit(
                f"{repo.name}: no checkout at {where} and no mirror at {mirror}; fetch github:{repo.github} first"
            )
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror), str(where)], check=True)
        present = []
        for row in _git(where, "ls-tree", "-r", repo.commit, "--format=%(objectname) %(path)").splitlines():
            obj, path = row.split(" ", 1)
            if (
                subprocess.run(
                    ["git", "-C", str(where), "cat-file", "-e", obj], capture_output=True
                ).returncode
                == 0
            ):
                present.append(path)
        _git(where, "update-ref", "--no-deref", "HEAD", repo.commit)
        subprocess.run(
            [
                "git",
                "-C",
                str(where),
                "checkout",
                repo.commit,
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            input="\0".join(present),
            text=True,
            check=True,
            capture_output=True,
        )
    head = _git(where, "rev-parse", "HEAD").strip()
    if head != repo.commit:
        sys.exit(
            f"{repo.name}: {where} is at {head[:12]}, not the pinned {repo.commit[:12]}; check it out there"
        )
    return where


def run_check(where: Path) -> list[dict[str, object]]:
    """The findings of `gpudoctor check --format json` run from a repository root."""
    env = dict(os.environ, GPUDOCTOR_NO_CACHE="1")
    argv = [sys.executable, "-m", "gpudoctor", "check", "--format", "json", "--jobs", "1", "."]
    proc = subprocess.run(argv, cwd=where, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):
        sys.exit(f"check failed in {where} (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    try:
        findings: list[dict[str, object]] = json.loads(proc.stdout)["findings"]
    except (ValueError, KeyError):
        sys.exit(f"check in {where} gave no JSON report: {proc.stderr.strip()[-400:]}")
    return [f for f in findings if f.get("location")]


def _key(repo: str, path: str, line: int, rule: str) -> tuple[str, str, int, str]:
    return (repo, path, line, rule)


def load_labels() -> tuple[dict[tuple[str, str, int, str], dict[str, str]], list[dict[str, object]]]:
    """Labels keyed by (repo, path, line, rule), and the list of missed problems."""
    data = json.loads(LABELS.read_text()) if LABELS.exists() else {"labels": [], "missed": []}
    labels = {}
    for entry in data["labels"]:
        if entry["label"] not in KINDS:
            sys.exit(f"{LABELS.name}: label {entry['label']!r} is not one of {', '.join(KINDS)}")
        labels[_key(entry["repo"], entry["path"], int(entry["line"]), entry["rule"])] = entry
    return labels, data.get("missed", [])


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("/work/corpus"))
    parser.add_argument("--only", default="", help="comma-separated repository names")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this Markdown file")
    parser.add_argument("--unlabelled", action="store_true", help="list findings without a label")
    parser.add_argument("--json", type=Path, help="write every joined finding to this JSON file")
    args = parser.parse_args(argv)
    chosen = {n for n in args.only.split(",") if n}
    labels, missed = load_labels()
    rows, joined, seen = [], [], set()
    per_rule: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for repo in REPOS:
        if chosen and repo.name not in chosen:
            continue
        where = ensure_checkout(repo, args.corpus)
        count: collections.Counter[str] = collections.Counter()
        for finding in run_check(where):
            loc = finding["location"]
            assert isinstance(loc, dict)
            key = _key(repo.name, str(loc["path"]), int(loc["line"]), str(finding["code"]))
            seen.add(key)
            entry = labels.get(key)
            kind = entry["label"] if entry else "unlabelled"
            count["findings"] += 1
            if finding["severity"] == "info":
                count["info"] += 1
                per_rule[key[3]]["info"] += 1
            else:  # a warning (or worse): what fails a CI job and what the goal counts
                count[kind] += 1
                count["warnings"] += 1
                per_rule[key[3]][kind] += 1
                if is_test_path(key[1]):
                    count["in tests"] += 1
            joined.append(
                {
                    "repo": repo.name,
                    "path": key[1],
                    "line": key[2],
                    "rule": key[3],
                    "severity": finding["severity"],
                    "message": finding["message"],
                    "label": kind,
                    "reason": entry["reason"] if entry else "",
                }
            )
        rows.append((repo, count))
    found_missed = []
    for item in missed:
        if chosen and item["repo"] not in chosen:
            continue
        hit = any(
            k[0] == item["repo"]
            and k[1] == item["path"]
            and k[3] == item["rule"]
            and abs(k[2] - int(item["line"])) <= MISSED_SLACK
            for k in seen
        )
        found_missed.append((item, hit))
    text = render(rows, per_rule, found_missed)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(joined, indent=1))
    if args.unlabelled:
        for item in joined:
            if item["label"] == "unlabelled":
                print(
                    f"UNLABELLED {item['repo']} {item['path']}:{item['line']} {item['rule']} {item['message']}"
                )
    stale = [k for k in labels if k not in seen and (not chosen or k[0] in chosen)]
    if stale:
        print(f"\n{len(stale)} labels match no finding now (the finding went away or moved):")
        for k in sorted(stale):
            print(f"  {k[0]} {k[1]}:{k[2]} {k[3]} [{labels[k]['label']}]")
    return 0


def render(
    rows: list[tuple[Repo, collections.Counter[str]]],
    per_rule: dict[str, collections.Counter[str]],
    found_missed: list[tuple[dict[str, object], bool]],
) -> str:
    """The per-repository table, the per-rule table, totals and the missed problems as Markdown."""
    cols = ("warnings", "true-act", "true-not-worth", "false", "unlabelled", "in tests", "info")
    out = ["| repo | style | commit | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    total: collections.Counter[str] = collections.Counter()
    for repo, count in rows:
        total.update(count)
        out.append(
            f"| {repo.name} | {repo.style} | {repo.commit[:12]} | "
            + " | ".join(str(count[c]) for c in cols)
            + " |"
        )
    out.append("| **total** | | | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
    n = total["warnings"]
    out += [
        "",
        f"Totals: {total['findings']} findings, of them {total['info']} info (listed, never failing a CI job) and "
        f"{n} warnings; of the warnings true and worth acting on {_pct(total['true-act'], n)}, "
        f"true but not worth it {_pct(total['true-not-worth'], n)}, false {_pct(total['false'], n)}, "
        f"unlabelled {_pct(total['unlabelled'], n)}; {total['in tests']} in test files.",
        "",
    ]
    out += [
        "| rule | warnings | true-act | true-not-worth | false | unlabelled | info |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in sorted(per_rule):
        c = per_rule[rule]
        out.append(
            f"| {rule} | {sum(c.values()) - c['info']} | {c['true-act']} | {c['true-not-worth']} | {c['false']} "
            f"| {c['unlabelled']} | {c['info']} |"
        )
    hits = sum(1 for _, hit in found_missed if hit)
    out += [
        "",
        f"Known real problems: {hits} of {len(found_missed)} found.",
        "",
        "| repo | where | rule | found | problem |",
        "|---|---|---|---|---|",
    ]
    for item, hit in found_missed:
        out.append(
            f"| {item['repo']} | {item['path']}:{item['line']} | {item['rule']} | {'yes' if hit else 'no'} | {item['reason']} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
