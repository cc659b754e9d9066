"""The trace side: torch.profiler (Kineto) traces in, per-rank metrics and fact sets out.

Modules, in data-flow order: :mod:`.reader` (files → :class:`~.reader.RankTrace`), with
:mod:`.events` (structs and columns), :mod:`.chunks` (in-place chunked decoding) and :mod:`.split`
(two-process decoding of big files); :mod:`.timeline` (HTA-exact event selection and interval
arithmetic), :mod:`.kernels` (what kernel names say), :mod:`.context`, :mod:`.metrics` and
:mod:`.steps` (per-rank numbers); :mod:`.facts` (fact sets for the engine) and :mod:`.analysis`
(``analyze_paths``: files → Report); :mod:`.vectorized` (numpy for tables of ≥ 1 M events). Nothing
here imports torch, pandas, rich or textual, nor numpy for a smaller table.
"""
