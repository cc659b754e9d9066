"""gpudoctor on pytorch/examples' DCGAN (``dcgan/main.py --dataset fake``), and what each named fix gains.

Why this exists: the scripts of ``realscripts_validation.py`` are fixed through their own flags. DCGAN
has few flags, and its costs are in the code: two optimizers per iteration (D, then G), five
``.item()`` reads and a print per iteration, a ``DataLoader`` re-created workers every epoch (FakeData's
1000 images are 16 batches of 64), a checkpoint per epoch. This harness runs the script unmodified
under ``gpudoctor run`` (findings, estimates, the agent's step rate), then runs copies of it with one
code change each — the change a finding's fix asks for — without any tool in the process, and prints
the measured iterations/s beside the estimate.

    # on the H200 (one call; thirdparty/pytorch_examples from pytorch/examples 77f55b9):
    python3 bench/validation/dcgan_validation.py --scripts thirdparty --seconds 25

Iterations/s come from the script's own progress lines (``[epoch/niter][i/len]``), timed as they are
printed, after a warm-up; the variant that prints every 50th iteration is timed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realscripts import patchruns, procs

_PROGRESS = re.compile(rb"^\[(\d+)/\d+\]\[(\d+)/(\d+)\]")

_PERSISTENT = ("num_workers=int(opt.workers))", "num_workers=int(opt.workers), persistent_workers=True)")
_PERSISTENT_DROP_LAST = ("num_workers=int(opt.workers))",
                         "num_workers=int(opt.workers), persistent_workers=True, drop_last=True)")
_COMPILE = ("# setup optimizer", "netD = torch.compile(netD)\nnetG = torch.compile(netG)\n# setup optimizer")
_COMPILE_RO = ("# setup optimizer", "netD = torch.compile(netD, mode=\"reduce-overhead\")\n"
               "netG = torch.compile(netG, mode=\"reduce-overhead\")\n# setup optimizer")
#: GD303's advice when the step already replays CUDA graphs: compile what runs outside them, here both
#: optimizer steps (the torch.compile optimizer recipe: a compiled function that calls step())
_COMPILE_OPT = ("optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))\n",
                "optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))\n"
                "@torch.compile(fullgraph=False)\ndef _step_d():\n    optimizerD.step()\n"
                "@torch.compile(fullgraph=False)\ndef _step_g():\n    optimizerG.step()\n")
_CALL_OPT = [("        optimizerD.step()\n", "        _step_d()\n"), ("        optimizerG.step()\n", "        _step_g()\n")]
_MARK_STEP = ("    for i, data in enumerate(dataloader, 0):\n",
              "    for i, data in enumerate(dataloader, 0):\n        torch.compiler.cudagraph_mark_step_begin()\n")

#: variant -> (text to find, its replacement) pairs applied to main.py, and extra script flags; a name
#: may end in ``#2`` (any suffix after ``#``) to run the same variant again in one call — a baseline timed
#: before and after the others shows this machine's drift — each run keyed by its full name
VARIANTS: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "as_is": ([], []),
    "workers_8": ([], ["--workers", "8"]),
    "persistent_workers": ([("num_workers=int(opt.workers))",
                             "num_workers=int(opt.workers), persistent_workers=True)")], []),
    "persistent_workers_8": ([("num_workers=int(opt.workers))",
                               "num_workers=int(opt.workers), persistent_workers=True)")], ["--workers", "8"]),
    # the syncs: no .item() inside the step, the losses printed every 50th iteration
    "log_every_50": ([("D_x = output.mean().item()", "D_x = output.mean()"),
                      ("D_G_z1 = output.mean().item()", "D_G_z1 = output.mean()"),
                      ("D_G_z2 = output.mean().item()", "D_G_z2 = output.mean()"),
                      ("        print('[%d/%d][%d/%d] Loss_D", "        if i % 50 == 0: print('[%d/%d][%d/%d] Loss_D")],
                     []),
    # the reads removed after the input fix (the order gpudoctor's findings give)
    "persistent_workers_8_log_every_50": ([("num_workers=int(opt.workers))",
                                            "num_workers=int(opt.workers), persistent_workers=True)"),
                                           ("D_x = output.mean().item()", "D_x = output.mean()"),
                                           ("D_G_z1 = output.mean().item()", "D_G_z1 = output.mean()"),
                                           ("D_G_z2 = output.mean().item()", "D_G_z2 = output.mean()"),
                                           ("        print('[%d/%d][%d/%d] Loss_D",
                                            "        if i % 50 == 0: print('[%d/%d][%d/%d] Loss_D")], ["--workers", "8"]),
    "compile": ([("# setup optimizer", "netD = torch.compile(netD)\nnetG = torch.compile(netG)\n# setup optimizer")],
                []),
    # GD303's fixes (launch-bound), tried after the input fix, the order gpudoctor's findings give: compile
    # alone only fuses; reduce-overhead also replays each net's kernels as a CUDA graph
    "persistent_workers_8_compile": ([_PERSISTENT, _COMPILE], ["--workers", "8"]),
    "persistent_workers_8_compile_ro": ([_PERSISTENT, _COMPILE_RO], ["--workers", "8"]),
    # FakeData's 1000 images end each epoch on a batch of 40: a new shape, compiled and recorded again
    "persistent_workers_8_compile_ro_drop_last": ([_PERSISTENT_DROP_LAST, _COMPILE_RO], ["--workers", "8"]),
    # netD runs three times per iteration: if the graphs' outputs are overwritten by a later replay,
    # marking each iteration's start is what torch's error message asks for
    "persistent_workers_8_compile_ro_mark_step": ([_PERSISTENT, _COMPILE_RO, _MARK_STEP], ["--workers", "8"]),
    # GD303 on that variant (8 graph replays per step): the gaps are outside the graphs, so compile the optimizer steps
    "persistent_workers_8_compile_ro_mark_step_opt": ([_PERSISTENT, _COMPILE_RO, _MARK_STEP, _COMPILE_OPT, *_CALL_OPT],
                                                      ["--workers", "8"]),
}


def variant(name: str) -> str:
    """The VARIANTS key of a run's name: ``persistent_workers_8#2`` is ``persistent_workers_8`` run again."""
    base = patchruns.variant_of(name)
    if base not in VARIANTS:
        raise SystemExit(f"no variant {base!r}: one of {', '.join(VARIANTS)}")
    return base


def script_for(work: Path, original: str, name: str) -> Path:
    edits, _ = VARIANTS[variant(name)]
    folder = work / name.replace("#", "_")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "main.py"
    path.write_text(patchruns.patched(original, edits, "dcgan/main.py"))
    return path


def base_args(name: str, outf: Path) -> list[str]:
    return ["--dataset", "fake", "--accel", "--niter", "100000", "--outf", str(outf), *VARIANTS[variant(name)][1]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scripts", type=Path, required=True, help="folder with pytorch_examples/dcgan/main.py")
    p.add_argument("--seconds", type=float, default=25.0, help="timed seconds per plain run")
    p.add_argument("--warmup", type=float, default=20.0, help="seconds before timing (compile variants: +40)")
    p.add_argument("--duration", type=float, default=45.0, help="gpudoctor run --duration")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    p.add_argument("--diagnose", default="as_is,persistent_workers_8,log_every_50",
                   help="variants also run under gpudoctor (once each, on the first run of the name)")
    p.add_argument("--baseline", default="as_is",
                   help="variant the table divides by (the mean of its runs where it is run more than once)")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = p.parse_args(argv)
    procs.install_cleanup()
    original = (args.scripts / "pytorch_examples" / "dcgan" / "main.py").read_text()
    python = sys.executable
    gpudoctor = [python, "-m", "gpudoctor"]
    results: dict[str, Any] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    names = [v for v in args.variants.split(",") if v]
    for name in names:
        variant(name)  # a misspelt name fails here, not after the runs before it
    to_diagnose = {variant(v) for v in args.diagnose.split(",") if v}
    with tempfile.TemporaryDirectory(prefix="gd_dcgan_") as tmp:
        work = Path(tmp)
        for name in names:
            script = script_for(work, original, name)
            # compiling (and recording CUDA graphs) takes the first tens of seconds of every compile variant
            warm = args.warmup + (40.0 if "compile" in variant(name) else 0.0)
            cmd = [python, str(script), *base_args(name, script.parent / "out")]
            diagnose = variant(name) in to_diagnose
            to_diagnose.discard(variant(name))
            results[name] = patchruns.measure(name, cmd, script.parent, _PROGRESS, args.seconds, warm,
                                              args.duration if diagnose else None, gpudoctor, work, args.out,
                                              "dcgan", 64)
    (args.out / "dcgan_validation.json").write_text(json.dumps(results, indent=1))
    patchruns.print_rate_table(results, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
