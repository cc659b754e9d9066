"""Write a large synthetic Kineto trace by replicating a real trace's profiled steps.

Why this exists: the reader's throughput and memory goals (≥ 100 MB/s, peak RSS ≤ 1.5× the JSON size)
are about gigabyte-sized traces, and nobody ships one. This takes a real trace (default: the H200
fp32 resnet18 trace), and writes its events N times one after another — timestamps shifted by the
trace's span, correlation and external ids offset, ``ProfilerStep#N`` renumbered — in Kineto's own
layout (one event per block, two-space indent), until the file reaches the requested size.

Usage: python bench/trace_synth.py [--source TRACE] [--size-mb 1100] [--out /tmp/gpudoctor_synth.json]
       python bench/trace_synth.py --ranks 16 --out /tmp/gd_ranks16   (a job's rank traces, see write_rank_set)
The output goes to /tmp and must not be committed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

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
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as fh:
        doc = json.loads(fh.read())
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M" and e.get("cat") != "Trace"]
    times = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in body if isinstance(e.get("ts"), (int, float))]
    span_us = max(ends) - min(times) + 1000.0
    ids = [e.get("args", {}).get("correlation", 0) for e in body if isinstance(e.get("args"), dict)]
    ids += [e.get("args", {}).get("External id", 0) for e in body if isinstance(e.get("args"), dict)]
    ids += [e.get("id", 0) for e in body if isinstance(e.get("id"), int)]
    id_offset = max(i for i in ids if isinstance(i, int)) + 1
    steps = len({e["name"] for e in body if str(e.get("name", "")).startswith("ProfilerStep#")}) or 1
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
                   slow_rank: int | None = None) -> list[Path]:
    """Write ``ranks`` rank traces of one job from one real trace: rank r is the source's events with
    ``distributedInfo`` saying rank r of ``ranks`` and its timestamps shifted by r × 37 µs (clocks of
    different hosts never agree); ``slow_rank``'s events are stretched by 30% (a straggler)."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as fh:
        doc = json.loads(fh.read())
    events = doc.pop("traceEvents")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        stretch = 1.3 if rank == slow_rank else 1.0
        origin = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
        shifted = []
        for e in events:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = round(origin + (e["ts"] - origin) * stretch + rank * 37.0, 3)
            if isinstance(e.get("dur"), (int, float)):
                e["dur"] = round(e["dur"] * stretch, 3)
            shifted.append(e)
        head = dict(doc, distributedInfo={"backend": "nccl", "rank": rank, "world_size": ranks})
        body = json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n' + \
            ",\n".join("  " + json.dumps(e) for e in shifted) + "\n  ]\n}\n"
        path = out_dir / (f"rank-{rank}.pt.trace.json" + (".gz" if gzip_level is not None else ""))
        if gzip_level is not None:
            path.write_bytes(gzip.compress(body.encode(), compresslevel=gzip_level))
        else:
            path.write_text(body, encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-mb", type=float, default=1100.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpudoctor_synth.json"))
    parser.add_argument("--ranks", type=int, default=0, help="instead: a directory (--out) of this many rank traces")
    args = parser.parse_args()
    if args.ranks:
        paths = write_rank_set(args.source, args.out, args.ranks)
        print(f"wrote {len(paths)} rank traces of {args.source.name} to {args.out}")
        return
    size, copies = write_synthetic(args.source, args.out, args.size_mb)
    print(f"wrote {args.out}: {size / 1e6:.0f} MB, {copies} copies of {args.source.name}")


if __name__ == "__main__":
    main()
