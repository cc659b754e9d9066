"""Whether the step's verdict and the first card agree, and a sentence that says why when they do not.

Why this exists: the verdict names what the step is made of most ("GPU compute bounds the step"), the
cards are ordered by what their fix is estimated to gain. Both are right, and a reader still stops
when they seem to disagree: the input-bound ResNet-50 trace (num_workers=0) read "GPU compute bounds
the step" above GD102 input-bound, and HTA's trace_filter read "Host overhead bounds the step" with no
host-side finding at all. Every view asks :func:`verdict_note` and prints its sentence under the verdict.

What it must not do: judge anything anew — it reads the verdict's bound, the findings' codes and
their estimates, and maps a rule's family to the part of the step its fix shortens.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudoctor.bottleneck import Bottleneck
from gpudoctor.model import Finding

#: The part of the step a rule's fix shortens (the verdict's ``bound``), by code; families by prefix.
_BY_CODE = {"GD101": "", "GD204": "host-overhead", "GD302": "input", "GD401": "host-overhead",
            "GD402": "host-overhead", "GD403": "gpu-compute", "GD704": "", "GD702": "input"}
_BY_FAMILY = {"GD1": "input", "GD2": "gpu-compute", "GD3": "host-overhead", "GD4": "host-overhead",
              "GD5": "memory", "GD6": "communication", "GD7": "gpu-compute"}

_WORDS = {"gpu-compute": "GPU compute", "input": "the input pipeline", "host-overhead": "host overhead",
          "communication": "communication", "memory": "the memory allocator"}

_NONE_HINT = {
    "host-overhead": "the trace does not show which host work it is (no DataLoader, sync or launch finding "
                     "fired); py-spy (`gpudoctor attach`) or a profile with with_stack=True shows where the host "
                     "spends the step",
    "gpu-compute": "no kernel-level finding fired: the kernels may already run as fast as this model allows",
    "input": "no input finding fired for this rank",
    "communication": "no collective finding fired: the communication may already overlap as well as it can",
    "memory": "no allocator finding fired",
}


def addresses(finding: Finding) -> str:
    """The verdict bound a finding's fix shortens ('' for a symptom such as GD101)."""
    if finding.code in _BY_CODE:
        return _BY_CODE[finding.code]
    return _BY_FAMILY.get(finding.code[:3], "")


def verdict_note(bottleneck: Bottleneck | None, findings: Sequence[Finding]) -> str:
    """'' when the first finding addresses what bounds the step (or there is no verdict or finding);
    else one sentence on why the report reads the way it does."""
    if bottleneck is None or not findings or bottleneck.bound not in _WORDS:
        return ""
    bound = bottleneck.bound
    first = findings[0]
    if addresses(first) == bound:
        return ""
    matching = [f for f in findings if addresses(f) == bound]
    words = _WORDS[bound]
    if not matching:
        return f"No finding names a cause inside {words}, which bounds the step: {_NONE_HINT[bound]}."
    if addresses(first) == "":
        return ""
    gain = f", est. {_range(first)}" if first.impact is not None else ""
    other = matching[0]
    other_gain = f", est. {_range(other)}" if other.impact is not None else ""
    return (f"{first.code} ({_WORDS.get(addresses(first), addresses(first))}{gain}) comes before {other.code} "
            f"({words}{other_gain}): the cards are ordered by what their fix is estimated to gain, the verdict "
            "names what the step is made of most.")


def _range(finding: Finding) -> str:
    assert finding.impact is not None
    return finding.impact.describe().removeprefix("est. ").split(" · ")[0]
