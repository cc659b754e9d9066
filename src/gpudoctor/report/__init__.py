"""Views of a finished analysis: terminal text, JSON, Markdown (and SARIF / GitHub for ``check``).

Renderers only format; they never compute metrics.
"""

from gpudoctor.report.model import MetricTable, Report

__all__ = ["MetricTable", "Report"]
