"""Started by Python at interpreter start-up in every process ``gpudoctor run`` launches.

``gpudoctor run`` puts this file's directory first on PYTHONPATH (so every rank under torchrun
gets it too) and names the directory holding the ``gpudoctor`` package in GPUDOCTOR_AGENT_PATH. It
starts the agent only in a program's main process — never in multiprocessing children (DataLoader
workers, forkserver, resource tracker), torch.compile workers or the torchrun launcher — then
takes its own directory off sys.path and chains to the sitecustomize it shadowed, if any.
Standard library only; it must never raise.
"""

import os
import sys


def _gpudoctor_wanted() -> bool:
    if os.environ.get("GPUDOCTOR_AGENT") != "1" or not os.environ.get("GPUDOCTOR_AGENT_PATH"):
        return False
    argv = " ".join(getattr(sys, "orig_argv", sys.argv))
    skip = ("from multiprocessing", "--multiprocessing-fork", "compile_worker", "torch.distributed.run",
            "torch.distributed.launch", "bin/torchrun")
    return not any(s in argv for s in skip)


def _gpudoctor_start() -> None:
    path = os.environ["GPUDOCTOR_AGENT_PATH"]
    added = path not in sys.path
    if added:
        sys.path.insert(0, path)
    try:
        from gpudoctor.agent import runtime

        runtime.install("run")
    except Exception as exc:
        sys.stderr.write(f"gpudoctor: the agent did not start in this process: {type(exc).__name__}: {exc}\n")
    finally:
        if added and path in sys.path:
            sys.path.remove(path)


def _gpudoctor_chain() -> None:
    """Leave sys.path as it would be without us, then import the sitecustomize we shadowed."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    ours = sys.modules.pop("sitecustomize", None)
    try:
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if exc.name != "sitecustomize":
            sys.stderr.write(f"gpudoctor: your sitecustomize failed to import: {exc}\n")
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    except Exception as exc:
        sys.stderr.write(f"gpudoctor: your sitecustomize raised {type(exc).__name__}: {exc}\n")


try:
    if _gpudoctor_wanted():
        _gpudoctor_start()
except Exception:
    pass
_gpudoctor_chain()
