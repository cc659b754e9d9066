"""One card per rule for a finding that every rank has: the per-rank findings of a job, grouped for reading.

Why this exists: a job's rank traces usually share their problems — 16 ranks of one eager model give 16
GD403 findings that differ only in their rank and their numbers. Listed one by one the report is a
wall of identical cards (64 identical ranks gave 448), and the one finding that differs (a straggler)
drowns. The terminal and Markdown views show such a set as one card: the rank with the largest
estimated gain stands for the others, and a line names the ranks and the range of their estimates.
The JSON report keeps every rank's finding (machines read it, and ``compare`` matches them).

What it must not do: change the findings, their order among groups (the first member's place, which
is already by gain), or group findings that have a place other than a rank (a file line, a GPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gpudoctor.model import Finding, Severity
from gpudoctor.numbers import speedup


class FindingGroup(msgspec.Struct, frozen=True):
    """A finding and the same rule's findings on other ranks (``others`` empty: a finding alone)."""

    lead: Finding
    others: tuple[Finding, ...] = ()

    @property
    def members(self) -> tuple[Finding, ...]:
        return (self.lead, *self.others)

    @property
    def ranks(self) -> list[int]:
        return sorted(f.location.rank for f in self.members if f.location.rank is not None)

    def where(self) -> str:
        """``ranks 0–7, 9`` for a group, the lead's own place for a finding alone."""
        if not self.others:
            return self.lead.location.describe()
        return f"ranks {rank_ranges(self.ranks)} ({len(self.members)})"

    def spread(self) -> str:
        """One line on the other members: how many ranks, and the range of their estimates."""
        if not self.others:
            return ""
        gains = [f.impact.est_speedup for f in self.members if f.impact is not None]
        text = f"the same on {len(self.members)} ranks"
        largest = ""
        if len(gains) == len(self.members) and gains:
            shown = speedup(min(gains), max(gains))
            if "–" not in shown:
                text += f" (est. {shown} each)"
            else:
                text += f" (est. {shown} per rank)"
                if self.lead.impact is not None and self.lead.impact.est_speedup >= max(gains):
                    largest = ", the largest"
        severities = {f.severity for f in self.members}
        if len(severities) > 1:
            by = sorted(severities, key=lambda s: -s.rank)
            text += "; " + ", ".join(
                f"{s.value} on {'rank' if len(r) == 1 else 'ranks'} {rank_ranges(r)}"
                for s in by if (r := [f.location.rank for f in self.members
                                      if f.severity is s and f.location.rank is not None]))
        lead = self.lead.location.rank
        return text + (f"; shown: rank {lead}{largest}" if lead is not None else "")


def _key(f: Finding) -> tuple[object, ...] | None:
    loc = f.location
    if loc.rank is None or loc.line is not None or loc.gpu is not None or loc.pid is not None or loc.step is not None:
        return None
    return (f.code,)


def group_findings(findings: Sequence[Finding]) -> list[FindingGroup]:
    """Findings in their order, the same rule's per-rank findings folded into one group in the place of
    the first of them; the group's lead is its most severe member (the first of those), so that one
    card carries the highest severity and names the ranks (a rule at warning on rank 1 and info on
    rank 0 is one card, not two with the same text)."""
    members: list[list[Finding]] = []
    at: dict[tuple[object, ...], list[Finding]] = {}
    for f in findings:
        key = _key(f)
        if key is not None and key in at:
            at[key].append(f)
            continue
        members.append([f])
        if key is not None:
            at[key] = members[-1]
    groups = []
    for m in members:
        lead = max(m, key=lambda f: f.severity.rank)   # max keeps the first of equals
        groups.append(FindingGroup(lead, tuple(f for f in m if f is not lead)))
    return groups


def rank_ranges(ranks: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 5, 7, 8]`` → ``0–3, 5, 7–8``."""
    out: list[str] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}")
        run = [r]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}")
    return ", ".join(out)


def split_no_gain(groups: Sequence[FindingGroup]) -> tuple[list[FindingGroup], list[FindingGroup]]:
    """(cards, the rest): an info group whose every member's fix is estimated at ``1.00×`` gains nothing a
    card could show (``est. 1.00× · costs 0.0 ms/step``); the views name those on one line instead."""
    cards: list[FindingGroup] = []
    rest: list[FindingGroup] = []
    for group in groups:
        quiet = all(f.severity is Severity.INFO and f.impact is not None and f.impact.gains_nothing
                    for f in group.members)
        (rest if quiet else cards).append(group)
    return cards, rest


def no_gain_line(groups: Sequence[FindingGroup]) -> str:
    """``Also found, each fix estimated at 1.00×: GD302 pageable-memcpy (ranks 0–1).``"""
    if not groups:
        return ""
    def place(g: FindingGroup) -> str:
        return f"ranks {rank_ranges(g.ranks)}" if g.others else g.where()

    named = ", ".join(f"{g.lead.code} {g.lead.name} ({place(g)})" if place(g) else f"{g.lead.code} {g.lead.name}"
                      for g in groups)
    return f"Also found, each fix estimated at 1.00× (no card): {named}."
