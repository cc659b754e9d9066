"""Write a large synthetic Kineto trace by replicating a real trace's profiled steps.

Why this exists: the reader's throughput and memory goals (≥ 100 MB/s, peak RSS ≤ 1.5× the JSON size)
are about gigabyte-sized traces, and nobody ships one. This takes a real trace (default: the H200
fp32 resnet18 trace), and writes its events N times one after another — timestamps shifted by the
trace's span, correlation and external ids offset, ``ProfilerStep#N`` renumbered — in Kineto's own
layout (one event per block, two-space indent), until the file reaches the requested size.

Usage: python bench/trace_synth.py [--source TRACE] [--size-mb 1100] [--out /tmp/gpudoctor_synth.json]
       python bench/trace_synth.py --ranks 16 --out /tmp/gd_ranks16   (a job's rank traces, see write_rank_set)
       python bench/trace_synth.py --ranks 16 --rank-mb 60 --out /tmp/gd_big16   (each rank ~60 MB: steps replicated)
The output goes to /tmp and must not be committed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "traces" / "h200" / "resnet_fp32.json.gz"
_STEP = re.compile(r"ProfilerStep#(\d+)")


def _shift(event: dict[str, Any], copy: int, span_us: float, id_offset: int, steps: int) -> dict[str, Any]:
    out = dict(event)
    if isinstance(out.get("ts"), (int, float)):
        out["ts"] = round(out["ts"] + copy * span_us, 3)
    if isinstance(out.get("id"), int):
        out["id"] = out["id"] + copy * id_offset
    name = out.get("name")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        out["name"] = _STEP.sub(lambda m: f"ProfilerStep#{int(m.group(1)) + copy * steps}", name)
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id"):
            if isinstance(args.get(key), int):
                args[key] = args[key] + copy * id_offset
        out["args"] = args
    return out


def write_synthetic(source: Path, out: Path, size_mb: float) -> tuple[int, int]:
    """Write the synthetic trace; returns (bytes written, copies of the source)."""
    doc, events = _read_source(source)
    meta, body = _meta_and_body(events)
    span_us, id_offset, steps = _copy_geometry(body)
    header = json.dumps(doc, indent=2)[:-2]  # without the closing "\n}"
    target = int(size_mb * 1e6)
    written = 0
    copies = 0
    with out.open("w", encoding="utf-8") as fh:
        fh.write(header + ',\n  "traceEvents": [\n')
        first = True
        for e in meta:
            fh.write(("" if first else ",\n") + "  " + json.dumps(e))
            first = False
        while written < target:
            chunk = ",\n".join("  " + json.dumps(_shift(e, copies, span_us, id_offset, steps)) for e in body)
            fh.write(("" if first else ",\n") + chunk)
            first = False
            written += len(chunk) + 2
            copies += 1
        fh.write("\n  ]\n}\n")
    return out.stat().st_size, copies


def write_rank_set(source: Path, out_dir: Path, ranks: int, gzip_level: int | None = None,
                   slow_rank: int | None = None, rank_mb: float | None = None, processes: int = 1) -> list[Path]:
    """Write ``ranks`` rank traces of one job from one real trace: rank r is the source's events with
    ``distributedInfo`` saying rank r of ``ranks`` and its timestamps shifted by r × 37 µs (clocks of
    different hosts never agree); ``slow_rank``'s events are stretched by 30% (a straggler).

    With ``rank_mb``, each rank is the source's steps replicated (as :func:`write_synthetic` does)
    until it holds about that many MB of JSON — a real job's rank traces are tens to hundreds of MB —
    written on ``processes`` processes at once (one rank each)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [out_dir / (f"rank-{rank}.pt.trace.json" + (".gz" if gzip_level is not None else ""))
             for rank in range(ranks)]
    if rank_mb is not None:
        jobs = [(source, names[rank], rank, ranks, rank_mb, 1.3 if rank == slow_rank else 1.0, gzip_level)
                for rank in range(ranks)]
        if processes <= 1:
            for job in jobs:
                _write_big_rank(*job)
        else:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=processes) as pool:
                list(pool.map(_write_big_rank, *zip(*jobs)))
        return names
    doc, events = _read_source(source)
    origin = _origin(events)
    for rank in range(ranks):
        stretch = 1.3 if rank == slow_rank else 1.0
        shifted = [_on_rank(dict(e), origin, stretch, rank) for e in events]
        head = dict(doc, distributedInfo={"backend": "nccl", "rank": rank, "world_size": ranks})
        body = json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n' + \
            ",\n".join("  " + json.dumps(e) for e in shifted) + "\n  ]\n}\n"
        path = names[rank]
        if gzip_level is not None:
            path.write_bytes(gzip.compress(body.encode(), compresslevel=gzip_level))
        else:
            path.write_text(body, encoding="utf-8")
    return names


def _write_big_rank(source: Path, path: Path, rank: int, ranks: int, rank_mb: float, stretch: float,
                    gzip_level: int | None) -> None:
    """One rank of :func:`write_rank_set` with ``rank_mb``: the source's steps replicated, then shifted."""
    doc, events = _read_source(source)
    meta, body = _meta_and_body(events)
    span_us, id_offset, steps = _copy_geometry(body)
    origin = _origin(body)
    head = dict(doc, distributedInfo={"backend": "nccl", "rank": rank, "world_size": ranks})
    target = int(rank_mb * 1e6)
    written = copies = 0
    with _open_text(path, gzip_level) as out:
        out.write(json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n')
        out.write(",\n".join("  " + json.dumps(e) for e in meta))
        while written < target:
            chunk = ",\n".join("  " + json.dumps(_on_rank(_shift(e, copies, span_us, id_offset, steps), origin,
                                                             stretch, rank)) for e in body)
            out.write((",\n" if meta or copies else "") + chunk)
            written += len(chunk) + 2
            copies += 1
        out.write("\n  ]\n}\n")


def _read_source(source: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The source trace's document without its events, and its events."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as fh:
        doc = json.loads(fh.read())
    return doc, doc.pop("traceEvents")


def _meta_and_body(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Metadata events (written once) and the events a copy of the steps repeats."""
    return ([e for e in events if e.get("ph") == "M"],
            [e for e in events if e.get("ph") != "M" and e.get("cat") != "Trace"])


def _origin(events: list[dict[str, Any]]) -> float:
    return min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))


def _on_rank(e: dict[str, Any], origin: float, stretch: float, rank: int) -> dict[str, Any]:
    """``e`` (a copy, changed in place) as rank ``rank`` records it: its clock 37 µs per rank later, a
    straggler's times stretched."""
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = round(origin + (e["ts"] - origin) * stretch + rank * 37.0, 3)
    if isinstance(e.get("dur"), (int, float)):
        e["dur"] = round(e["dur"] * stretch, 3)
    return e


def _open_text(path: Path, gzip_level: int | None) -> TextIO:
    if gzip_level is None:
        return path.open("w", encoding="utf-8")
    return gzip.open(path, "wt", encoding="utf-8", compresslevel=gzip_level)


def _copy_geometry(body: list[dict[str, Any]]) -> tuple[float, int, int]:
    """How one copy of the source's steps is shifted: its span (µs), its id range, its step count."""
    times = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in body if isinstance(e.get("ts"), (int, float))]
    span_us = max(ends) - min(times) + 1000.0
    ids = [e.get("args", {}).get("correlation", 0) for e in body if isinstance(e.get("args"), dict)]
    ids += [e.get("args", {}).get("External id", 0) for e in body if isinstance(e.get("args"), dict)]
    ids += [e.get("id", 0) for e in body if isinstance(e.get("id"), int)]
    id_offset = max(i for i in ids if isinstance(i, int)) + 1
    steps = len({e["name"] for e in body if str(e.get("name", "")).startswith("ProfilerStep#")}) or 1
    return span_us, id_offset, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-mb", type=float, default=1100.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpudoctor_synth.json"))
    parser.add_argument("--ranks", type=int, default=0, help="instead: a directory (--out) of this many rank traces")
    parser.add_argument("--rank-mb", type=float, default=None,
                        help="with --ranks: replicate the source's steps to about this many MB per rank")
    args = parser.parse_args()
    if args.ranks:
        paths = write_rank_set(args.source, args.out, args.ranks, rank_mb=args.rank_mb,
                               processes=len(os.sched_getaffinity(0)))
        print(f"wrote {len(paths)} rank traces of {args.source.name} to {args.out}")
        return
    size, copies = write_synthetic(args.source, args.out, args.size_mb)
    print(f"wrote {args.out}: {size / 1e6:.0f} MB, {copies} copies of {args.source.name}")


if __name__ == "__main__":
    main()
