"""Verdicts and tables of the multi-GPU validation (bench/validation/multigpu_validation.py).

Why this exists: the validation's results are judged and formatted in one place, apart from the
process plumbing, so that the CPU tests can feed them canned reports. Pure functions over the
report JSON ``gpudoctor … --format json`` prints and over the result dicts; no subprocesses, no torch.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

EXPECTED = {"healthy": None, "compute": (1, "compute"), "input": (1, "input")}
STRAGGLER_RE = re.compile(r"straggler \(([^)]+)\)")


def summarize_report(report: dict[str, Any]) -> dict[str, Any]:
    """What a gpudoctor report says about ranks: GD601/GD610 (rank, cause), the Ranks table, the rest."""
    findings = report.get("findings", [])
    def row(f: dict[str, Any]) -> dict[str, Any]:
        return {"code": f["code"], "rank": (f.get("location") or {}).get("rank"),
                "cause": (m.group(1) if (m := STRAGGLER_RE.search(f.get("message", ""))) else None),
                "message": f.get("message", "")[:200]}
    # live verdicts judge the scenario; verdicts from the all-ranks profile window are kept apart
    rank_findings = [row(f) for f in findings
                     if f["code"] in ("GD601", "GD610", "GD613") and f.get("source", "live") != "trace"]
    profile_findings = [row(f) for f in findings if f["code"] in ("GD601", "GD602") and f.get("source") == "trace"]
    table = next((t["rows"] for t in report.get("tables", []) if t.get("key") == "ranks"), None)
    if table is None and isinstance(report.get("ranks"), list):
        table = report["ranks"]
    return {"rank_findings": rank_findings, "profile_findings": profile_findings, "ranks_table": table or [],
            "other": sorted({f["code"] for f in findings} - {"GD601", "GD602", "GD610", "GD613"}),
            "agent": (report.get("agent") or {}).get("status")}


def verdict(mode: str, rank_findings: list[dict[str, Any]], ranks_table: list[dict[str, Any]] | None = None) -> str:
    """``ok`` when the findings say what the scenario expects, else what is wrong.

    ``ranks_table`` (the report's Ranks rows), when given and with fewer than 2 rows, means the
    session did not watch the ranks side by side: nothing can be judged, even "no straggler".
    """
    stragglers = [(f["rank"], f["cause"]) for f in rank_findings if f["code"] == "GD601"]
    expected = EXPECTED[mode]
    if ranks_table is not None and len(ranks_table) < 2 and not stragglers:
        return "not judged: ranks not watched (no Ranks table)"
    if expected is None:
        return "ok" if not rank_findings else "false positive"
    if expected in stragglers and len(stragglers) == 1:
        return "ok"
    if any(r == expected[0] for r, _ in stragglers):
        return "rank ok, cause " + ",".join(str(c) for _, c in stragglers)
    return "missed" if not stragglers else "wrong rank"


def overhead_summary(rates: list[tuple[str, float, float]]) -> dict[str, Any]:
    """Attached rate over the mean of its neighbouring unattached windows (cancels a linear drift)."""
    ratios = []
    for i, (kind, rate, _) in enumerate(rates):
        if kind != "attached":
            continue
        near = [rates[j][1] for j in (i - 1, i + 1) if 0 <= j < len(rates) and rates[j][0] == "alone"]
        if near and statistics.mean(near) > 0:
            ratios.append(rate / statistics.mean(near))
    alone = [r for k, r, _ in rates if k == "alone"]
    attached = [r for k, r, _ in rates if k == "attached"]
    return {"windows": [{"kind": k, "steps_per_s": round(r, 3), "s": s} for k, r, s in rates],
            "alone_steps_per_s": round(statistics.mean(alone), 3) if alone else None,
            "attached_steps_per_s": round(statistics.mean(attached), 3) if attached else None,
            "attached_pct": round(100.0 * statistics.mean(ratios), 2) if ratios else None}


def _v(value: Any) -> str:
    return "–" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _findings_cell(r: dict[str, Any]) -> str:
    if r.get("error"):
        return "error: " + r["error"]
    cells = [f"{f['code']} rank {f['rank']} ({f['cause'] or '-'})" for f in r.get("rank_findings", [])]
    return "; ".join(cells) or "none"


def _job_cell(r: dict[str, Any]) -> str:
    job = r.get("job") or {}
    return " / ".join(f"{v['step_ms']:.1f}" for _, v in sorted(job.items())) or "–"


def _wait_cell(r: dict[str, Any]) -> str:
    job = r.get("job") or {}
    return " / ".join(f"{v['data_wait_ms']:.1f}" for _, v in sorted(job.items())) or "–"


def _ranks_cell(r: dict[str, Any]) -> str:
    rows = r.get("ranks_table") or []
    out = []
    for row in rows:
        score = row.get("straggler_score")
        out.append(f"r{row.get('rank')}: {_v(row.get('step_time_ms'))} ms, coll {_v(row.get('collective_wait_pct'))}%, "
                   f"score {_v(score)}, {row.get('status') or '-'}"
                   + (f" ({row['cause']})" if row.get("cause") else ""))
    return "; ".join(out) or "–"


def text_table(results: list[dict[str, Any]]) -> str:
    lines = [f"\n{'strategy':8} {'mode':8} {'way':6} {'verdict':16} {'step ms r0/r1':16} {'wait ms r0/r1':14} "
             f"{'alive':5}  GD601/GD610 | other"]
    for r in results:
        lines.append(f"{r['strategy']:8} {r['mode']:8} {r.get('way', '-'):6} {r.get('verdict', '-'):16} "
                     f"{_job_cell(r):16} {_wait_cell(r):14} {str(r.get('job_alive_after', '-')):5}  "
                     f"{_findings_cell(r)} | {','.join(r.get('other', [])) or '-'}")
    return "\n".join(lines)


def markdown(results: list[dict[str, Any]], extra: dict[str, Any], machine: dict[str, Any] | None = None) -> str:
    """The markdown fragment for docs/validation.md: scenarios, traces, overhead."""
    out = []
    if machine:
        out.append(f"Machine: {', '.join(machine.get('gpus') or ['no GPU'])}; python {machine.get('python')}, "
                   f"torch {machine.get('torch')}, gpudoctor {machine.get('gpudoctor')}, {machine.get('cpus')} CPUs.\n")
    out += ["| strategy | mode | how attached | expected | GD601/GD610 live (rank, cause) | verdict | job step ms r0 / r1 (mean) "
            "| data wait ms r0 / r1 (mean) | Ranks table (gpudoctor) | all-ranks profile window (post-hoc) | other findings "
            "| job alive after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        exp = EXPECTED.get(r["mode"])
        how = "`attach <torchrun pid>`" if r.get("way") == "attach" else "`run -- torchrun …`"
        out.append(f"| {r['strategy']} | {r['mode']} | {how} | "
                   f"{'no straggler' if exp is None else f'rank {exp[0]} ({exp[1]})'} | {_findings_cell(r)} | "
                   f"{r.get('verdict', '–')} | {_job_cell(r)} | {_wait_cell(r)} | {_ranks_cell(r)} | {_profile_cell(r)} | "
                   f"{', '.join(r.get('other', [])) or 'none'} | {r.get('job_alive_after', '–')} |")
    analyze = extra.get("analyze") or {}
    if analyze:
        out += ["", "| strategy | rank | overlap % | comm % of timeline | comm share of kernel time % | idle % "
                "| step ms p50 | analyze findings |", "|---|---|---|---|---|---|---|---|"]
        for strategy, a in analyze.items():
            for rk in a.get("ranks", []):
                out.append(f"| {strategy} | {rk['rank']} | {_v(rk.get('overlap_pct'))} | {_v(rk.get('comm_pct'))} | "
                           f"{_v(rk.get('comm_kernel_share_pct'))} | {_v(rk.get('idle_pct'))} | "
                           f"{_v(rk.get('step_time_p50_ms'))} "
                           f"| {', '.join(a.get('findings', [])) or 'none'} |")
            if a.get("error"):
                out.append(f"| {strategy} | – | {a['error']} | | | | | |")
    ov = extra.get("overhead")
    if ov:
        out += ["", f"Attach overhead (healthy DDP, all ranks watched, {len(ov['windows'])} alternating windows): "
                f"{ov['alone_steps_per_s']} steps/s alone, {ov['attached_steps_per_s']} attached → "
                f"**{ov['attached_pct']}%** of unattached throughput (goal ≥ 99.5%)."]
    base = extra.get("agent_baseline")
    if base:
        out.append(f"Agent in every rank, unwatched, vs the same job without it: {_v(base.get('agent_unwatched_steps_per_s'))}"
                   f" vs {_v(base.get('no_agent_steps_per_s'))} steps/s → {_v(base.get('agent_pct'))}%"
                   + (f" ({base['error']})" if base.get("error") else "") + ".")
    return "\n".join(out)


def _profile_cell(r: dict[str, Any]) -> str:
    """The attach --profile window on every rank: its status and post-hoc GD601/GD602."""
    prof = r.get("rank_profile")
    if not prof:
        return "–"
    found = "; ".join(f"{f['code']} rank {f['rank']}" + (f" ({f['cause']})" if f.get("cause") else "")
                      for f in r.get("profile_findings", [])) or "no GD601/GD602"
    overlap = ", ".join(f"r{x.get('rank')} overlap {_v(x.get('overlap_pct'))}%" for x in prof.get("ranks", []))
    return f"{prof.get('status')}: {found}" + (f" ({overlap})" if overlap else "")
