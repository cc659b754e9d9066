"""``gpudoctor compare``: did a change make training faster, and which problems did it remove?

The package is split so that each part stays testable on its own: :mod:`.stats` (noise estimate,
standard library only), :mod:`.inputs` (reading recordings, reports and trace sets into step times
and findings) and :mod:`.diff` (the comparison and the report it becomes). It must not import torch,
numpy, textual or rich.
"""

from gpudoctor.compare.diff import Comparison, compare_sides, to_report
from gpudoctor.compare.inputs import Side, load_side

__all__ = ["Comparison", "Side", "compare_sides", "load_side", "to_report"]
