"""The ``gpudoctor`` command line: builds the parser, configures logging, maps errors to exit codes.

This is the only module that configures logging. stdout carries data (reports, JSON, SARIF);
diagnostics go to stderr. Every error a user can cause ends in one sentence and a distinct exit code
(:mod:`gpudoctor.exitcodes`); a traceback only ever appears with ``--debug``.
"""

from __future__ import annotations

import argparse
import errno
import functools
import gc
import importlib
import math
import os
import sys
from collections.abc import Sequence

from gpudoctor import __version__
from gpudoctor.exitcodes import ExitCode, UserError

#: subcommand → (module under gpudoctor.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "start a bundled example job with a planted problem and open the dashboard on it"),
    "attach": ("attach", "diagnose a running training process (dashboard, or a report with --once/--duration)"),
    "run": ("run", "start a training command with the gpudoctor agent inside and diagnose it"),
    "analyze": ("analyze", "diagnose torch.profiler (Kineto) trace files, one per rank"),
    "check": ("check", "check training code, Dockerfiles, manifests and this machine before deploying"),
    "compare": ("compare", "compare two recordings or trace sets: speedup, findings gone/new, verdict"),
    "rules": ("rules_cmd", "list the diagnostic rules"),
    "explain": ("explain", "explain one rule: what it detects, why it is slow, the fix"),
}

#: Errors that only writing can cause: they mean the output could not be written, not a bug.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand (so ``analyze`` never imports the live side)."""
    parser = argparse.ArgumentParser(
        prog="gpudoctor",
        description="Tells you why your PyTorch GPU training job is slow and exactly how to fix it.",
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(f"gpudoctor.commands.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"gpudoctor.commands.{module_name}":
                raise
            continue
        sp = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return parser


def _configure_logging(verbosity: int, own_process: bool = True) -> None:
    """gpudoctor's messages to stderr, one line each.

    The handler looks ``sys.stderr`` up at every record, so a caller that swaps stderr (a test's
    capture, a notebook) never leaves it writing to a closed stream; and when ``main`` is called as
    a library (``own_process`` false) the records still propagate to the caller's handlers.
    """
    import logging  # here: `analyze` calls this only after forking its rank workers

    class _CurrentStderr(logging.StreamHandler):
        @property
        def stream(self) -> object:
            return sys.stderr

        @stream.setter
        def stream(self, _value: object) -> None:
            pass

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("gpudoctor: %(message)s"))
    root = logging.getLogger("gpudoctor")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = not own_process


#: Every numeric option of every command, checked in one place after parsing: ``dest``: (flag, the
#: smallest and the largest value accepted, unit). A value outside, NaN or infinite is exit 2 with one
#: sentence (``attach --duration nan`` watched nothing and said "No problems found"; ``--interval
#: 1e-9`` was accepted and took 7× the CPU).
NUMERIC_OPTIONS: dict[str, tuple[str, float, float, str]] = {
    "duration": ("--duration", 0.5, 7 * 86400.0, "seconds"),
    "interval": ("--interval", 0.1, 3600.0, "seconds"),
    "window": ("--window", 1.0, 3600.0, "seconds"),
    "profile": ("--profile", 0, 100, "steps"),
    "jobs": ("--jobs", 1, 1024, "processes"),
    "prometheus": ("--prometheus", 0, 65535, "(a TCP port)"),
    "threshold": ("--threshold", 0.0, 10_000.0, "percent"),
}


def numeric_option_problem(args: argparse.Namespace) -> str | None:
    """The sentence for the first numeric option out of its range (:data:`NUMERIC_OPTIONS`), or None."""
    for dest, (flag, low, high, unit) in NUMERIC_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not (math.isfinite(value) and low <= value <= high):
            return f"{flag} takes a number from {low:g} to {high:g} {unit}, not {value!r}."
    return None


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named by the first non-option argument, when it is one (else all are built)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; ``argv`` None means this process is gpudoctor (console script, ``-m``)."""
    if argv is not None:
        return _main(argv)
    # The process is ours: its start-up imports make ~60 cyclic collections of objects that are never
    # garbage (~10% of the import time), and at exit the interpreter would walk every object again
    # (~40 ms on the development machine); frozen objects are skipped by both.
    gc.disable()
    try:
        return _main(None)
    finally:
        gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(_command_in(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    problem = numeric_option_problem(args)
    if problem:  # before logging, workers or the target: one sentence, exit 2
        print(f"gpudoctor: {problem}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if argv is None:
        gc.enable()
    if getattr(args, "_late_logging", False):  # the command calls it once its workers run
        args.configure_logging = functools.partial(_configure_logging, args.verbose, argv is None)
    else:
        _configure_logging(args.verbose, argv is None)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    if sys.stdout is None:  # started with stdout closed (`>&-`): there is nowhere to write a report
        if sys.stderr is not None:
            print("gpudoctor: standard output is closed: redirect it to a file or /dev/null.", file=sys.stderr)
        return int(ExitCode.USAGE)
    try:
        status = int(args._run(args))
        sys.stdout.flush()  # a full disk shows here, as one sentence, not as a warning at interpreter exit
        return status
    except UserError as exc:
        print(f"gpudoctor: {exc}", file=sys.stderr)
        return int(exc.code)
    except KeyboardInterrupt:
        print("gpudoctor: interrupted.", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # stdout closed early (e.g. `| head`): not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.OK)
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            return _internal(args, exc)
        # -o on a full disk, /dev/full, stdout redirected to a full file system: a usage error, and the
        # unwritten rest of stdout goes nowhere so that interpreter exit does not fail a second time.
        print(f"gpudoctor: cannot write the output: {exc.strerror or exc}.", file=sys.stderr)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.USAGE)
    except Exception as exc:  # a bug: one line, and the traceback only on request
        return _internal(args, exc)


def _internal(args: argparse.Namespace, exc: Exception) -> int:
    if args.debug:
        raise exc
    print(f"gpudoctor: internal error: {type(exc).__name__}: {exc} (run with --debug and report it).",
          file=sys.stderr)
    return int(ExitCode.INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
