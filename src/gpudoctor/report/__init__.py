"""Views of a finished analysis: terminal text, JSON, Markdown (and SARIF / GitHub for ``check``).

Renderers only format; they never compute metrics.
"""

from gpudoctor.report.model import MetricTable, Report
from gpudoctor.report.render import FORMATS, render, to_dict, to_json, to_markdown

__all__ = ["FORMATS", "MetricTable", "Report", "render", "to_dict", "to_json", "to_markdown"]
