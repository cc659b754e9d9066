"""The Python API, for notebooks and scripts: ``gpudoctor.analyze(...)`` and ``gpudoctor.check(...)``.

Why this exists: people who read traces in notebooks (``TraceAnalysis(trace_dir=...)`` in HTA) want
objects, not a terminal report. These functions run exactly what the CLI runs
(:mod:`gpudoctor.pipeline`, with the same configuration lookup and rule selection) and hand back the
same :class:`~gpudoctor.report.model.Report` the CLI renders, wrapped with typed accessors: the
findings (evidence, fix, impact), per-rank metric tables as plain lists of dicts, and — when pandas
is installed, which is never required — as DataFrames.

What it must not do: print, exit, configure logging, or import pandas / rich / textual / torch at
import time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.config import Config, load_config
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.model import Finding, NotEvaluated, Severity
from gpudoctor.report.model import MetricTable, Report

PathLike = str | Path
ConfigLike = Config | PathLike | Mapping[str, Mapping[str, Any]] | None


@dataclass(frozen=True)
class ReportView:
    """A finished report with typed accessors; ``.report`` is the very object the CLI renders."""

    report: Report

    @property
    def findings(self) -> list[Finding]:
        """Findings, most costly first (each has ``evidence``, ``fix`` and ``impact``)."""
        return list(self.report.findings)

    @property
    def not_evaluated(self) -> list[NotEvaluated]:
        return list(self.report.not_evaluated)

    @property
    def notes(self) -> list[str]:
        return list(self.report.notes)

    @property
    def tables(self) -> dict[str, MetricTable]:
        """The report's tables by key (``ranks``, ``host``, ``stragglers``, ``steps`` …)."""
        return {t.key or t.title: t for t in self.report.tables}

    def table(self, key: str) -> list[dict[str, Any]]:
        """One table's rows as plain dicts (copies)."""
        try:
            return [dict(row) for row in self.tables[key].rows]
        except KeyError:
            raise KeyError(f"no table {key!r}; this report has {sorted(self.tables)}") from None

    def codes(self) -> list[str]:
        """The rule codes that fired, in report order."""
        return [f.code for f in self.report.findings]

    def count_at_or_above(self, severity: str | Severity) -> int:
        level = severity if isinstance(severity, Severity) else Severity.parse(severity)
        return self.report.count_at_or_above(level)

    def to_dict(self) -> dict[str, Any]:
        """The same document as ``--format json``."""
        from gpudoctor.report.render import to_dict

        return to_dict(self.report)

    def render(self, format: str = "text") -> str:
        """The report as the CLI prints it (``text``, ``json`` or ``markdown``)."""
        import io

        from gpudoctor.report import render

        out = io.StringIO()
        render(self.report, format, out)
        return out.getvalue()

    def to_pandas(self, key: str) -> Any:
        """One table as a pandas DataFrame (pandas is optional: ImportError says how to get it)."""
        return _data_frame(self.table(key))


@dataclass(frozen=True)
class TraceReport(ReportView):
    """What ``gpudoctor.analyze`` returns: findings, per-rank metrics and each rank's bottleneck verdict."""

    @property
    def ranks(self) -> list[dict[str, Any]]:
        """Every metric of every rank (the JSON report's ``ranks`` section), one dict per rank."""
        return [dict(r) for r in self.report.data.get("ranks", [])]

    @property
    def bottlenecks(self) -> list[Any]:
        """What bounds the step, per rank (``bound``, ``share_pct``, ``line``, ``parts``; ``.to_dict()``)."""
        return list(self.report.bottlenecks)

    def ranks_frame(self) -> Any:
        """Every metric of every rank as a DataFrame, one row per rank (needs pandas)."""
        rows = [{k: v for k, v in r.items() if not isinstance(v, (list, dict))} for r in self.ranks]
        return _data_frame(rows)


@dataclass(frozen=True)
class CheckReport(ReportView):
    """What ``gpudoctor.check`` returns: findings with their file, line and column."""

    @property
    def files_checked(self) -> int:
        return int(self.report.data.get("files_checked", 0))


def _data_frame(rows: list[dict[str, Any]]) -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("to_pandas() needs pandas (pip install pandas); the tables are also plain lists "
                          "of dicts: report.table(key)") from None
    return pandas.DataFrame(rows)


def _resolve(config: ConfigLike) -> tuple[Config, Any]:
    """The configuration (as the CLI finds it when ``config`` is None) and the catalog it selects."""
    from msgspec.structs import replace

    from gpudoctor.catalog import load_catalog
    from gpudoctor.catalog.options import resolve_options
    from gpudoctor.catalog.rulefile import RuleFileError

    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, (str, Path)):
        cfg = load_config(Path(config))
    elif config is None:
        cfg = load_config(None)
    elif isinstance(config, Mapping):
        cfg = Config(options={code: dict(opts) for code, opts in config.items()})
    else:
        raise UserError(f"config must be a Config, a path or a mapping of rule options, not {type(config).__name__}.",
                        ExitCode.USAGE)
    try:
        catalog = load_catalog(list(cfg.rule_dirs))
    except RuleFileError as exc:
        raise UserError(f"cannot load rules: {exc}", ExitCode.USAGE) from None
    cfg = replace(cfg, options=resolve_options(catalog, cfg.options))
    return cfg, catalog.select(cfg.select, cfg.ignore)


def _paths(path_or_paths: PathLike | Iterable[PathLike]) -> list[str]:
    if isinstance(path_or_paths, (str, Path)):
        return [str(path_or_paths)]
    return [str(p) for p in path_or_paths]


def analyze(path_or_paths: PathLike | Iterable[PathLike], config: ConfigLike = None, jobs: int | None = None,
            per_step: bool = False) -> TraceReport:
    """Diagnose torch.profiler traces — what ``gpudoctor analyze`` does, as objects.

    Args:
        path_or_paths: A trace file (``.json``/``.json.gz``), a directory of per-rank traces, or a list.
        config: None (the nearest ``gpudoctor.toml``/``pyproject.toml``, as the CLI), a path to a
            config file, a :class:`~gpudoctor.config.Config`, or rule options
            (``{"GD102": {"critical_dataloader_pct": 30}}``).
        jobs: Worker processes for a directory of rank traces (default: the usable cores).
        per_step: Add the per-step table (``report.table("steps")``).

    Raises:
        UserError: a path is missing or is not a readable trace, or the configuration is invalid.
    """
    from gpudoctor.pipeline import analyze_paths

    def setup() -> tuple[Any, Mapping[str, Mapping[str, Any]]]:  # while the rank workers read
        cfg, catalog = _resolve(config)
        return catalog, cfg.options

    return TraceReport(analyze_paths(_paths(path_or_paths), per_step=per_step, jobs=jobs, setup=setup))


def check(paths: PathLike | Iterable[PathLike] = ".", env: bool = False, config: ConfigLike = None,
          jobs: int | None = None) -> CheckReport:
    """Static checks of code and deployment files — what ``gpudoctor check`` does, as objects.

    Args:
        paths: Files or directories (training code, Dockerfiles, compose/Kubernetes manifests …).
        env: Also check this machine (driver vs torch CUDA, /dev/shm …).
        config: As for :func:`analyze`.
        jobs: Worker processes for large trees.

    Raises:
        UserError: a path is missing or the configuration is invalid.
    """
    from gpudoctor.pipeline import check_paths

    cfg, catalog = _resolve(config)
    return CheckReport(check_paths(_paths(paths), env=env, catalog=catalog, options=cfg.options, jobs=jobs))


__all__ = ["CheckReport", "ReportView", "TraceReport", "analyze", "check"]
