"""Started by Python at interpreter start-up in every process ``gpudoctor run`` launches.

``gpudoctor run`` puts this file's directory first on PYTHONPATH (so every rank under torchrun
gets it too) and names the directory holding the ``gpudoctor`` package in GPUDOCTOR_AGENT_PATH. It
starts the agent in a program's main process — never in the torchrun launcher, torch.compile
workers, the forkserver or the resource tracker — then takes its own directory off sys.path and
chains to the sitecustomize it shadowed, if any. A spawned multiprocessing child
(``--multiprocessing-fork``) may be a DataLoader worker or a ``torch.multiprocessing.spawn`` rank
(pytorch/examples' ImageNet ``--multiprocessing-distributed``); its agent starts only if it calls
``torch.distributed.init_process_group`` — what a rank does and a worker never does — through a
one-shot import hook on ``torch.distributed.distributed_c10d``. Standard library only; it must never
raise.
"""

import os
import sys


def _gpudoctor_wanted() -> str | None:
    """"now" (start the agent), "on-init" (a spawned child: start it if it joins a process group), None."""
    if os.environ.get("GPUDOCTOR_AGENT") != "1" or not os.environ.get("GPUDOCTOR_AGENT_PATH"):
        return None
    argv = " ".join(getattr(sys, "orig_argv", sys.argv))
    skip = ("compile_worker", "torch.distributed.run", "torch.distributed.launch", "bin/torchrun")
    if any(s in argv for s in skip):
        return None
    if "--multiprocessing-fork" in argv and "spawn_main" in argv:
        return "on-init"
    if "from multiprocessing" in argv or "--multiprocessing-fork" in argv:
        return None   # forkserver, resource tracker
    return "now"


def _gpudoctor_start(source: str = "run") -> None:
    path = os.environ["GPUDOCTOR_AGENT_PATH"]
    added = path not in sys.path
    if added:
        sys.path.insert(0, path)
    try:
        from gpudoctor.agent import runtime

        runtime.install(source)
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


class _GpudoctorRankHook:
    """One-shot import hook: when torch.distributed's c10d module loads, wrap ``init_process_group``
    so that the first successful call starts the agent in this (spawned) process."""

    module = "torch.distributed.distributed_c10d"

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        try:
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)
            loader = getattr(spec, "loader", None)
            exec_module = getattr(loader, "exec_module", None)
            if spec is None or loader is None or exec_module is None:
                return spec

            def exec_and_wrap(module):
                exec_module(module)
                _gpudoctor_wrap_init(module)

            loader.exec_module = exec_and_wrap
            return spec
        except Exception:
            return None


def _gpudoctor_wrap_init(module) -> None:
    original = getattr(module, "init_process_group", None)
    if original is None:
        return
    import functools

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        result = original(*args, **kwargs)
        try:
            _gpudoctor_start("spawn-rank")
        except Exception:
            pass
        return result

    module.init_process_group = init_process_group


try:
    _wanted = _gpudoctor_wanted()
    if _wanted == "now":
        _gpudoctor_start()
    elif _wanted == "on-init":
        sys.meta_path.insert(0, _GpudoctorRankHook())
except Exception:
    pass
_gpudoctor_chain()
