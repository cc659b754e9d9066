"""gpudoctor on Hugging Face accelerate's ``examples/cv_example.py`` under ``accelerate launch``, and
what each named fix gains.

Why this exists: the scripts of ``realscripts_validation.py`` are started by ``python``, torchrun or
``mp.spawn``; none by ``accelerate launch``, the launcher most accelerate users type, which starts the
training process as a child of its own Python process (one process: no rank in its environment). The
script is a real one: a timm ResNet-50d, the base frozen and the classifier trained, images decoded
by 4 DataLoader workers (``PetsDataset``: PIL open, ``RandomResizedCrop``), an evaluation pass per
epoch, ``Accelerator(mixed_precision=…)``. This harness runs it under ``gpudoctor run`` (findings,
estimates, which process was watched), then copies with one change each, without any tool in the
process, and prints the measured iterations/s beside the estimate.

Edits every copy gets (none changes the step): ``pretrained=False`` (the machine has no network; the
weights' values do not change the step's cost), 1000 epochs instead of 3 (a run long enough to time),
and a progress line per step, ``[epoch/1000][step/len]``, printed after ``zero_grad()`` (an int, no
device read). The data: 37 labels × 200 JPEGs of 300–500 px, the Oxford-IIIT Pet layout
(``<breed>_<n>.jpg``), generated at run time.

    # on the H200 (one call; thirdparty/accelerate/cv_example.py from huggingface/accelerate 16cb6eb):
    python3 bench/validation/accelerate_cv_validation.py --scripts thirdparty --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realscripts import datagen, patchruns, procs

_PROGRESS = re.compile(rb"^\[(\d+)/\d+\]\[(\d+)/(\d+)\]")
BATCH = 64       # the script's config

#: every copy: no download, a long run, a progress line per step
_ALWAYS = [('create_model("resnet50d", pretrained=True', 'create_model("resnet50d", pretrained=False'),
           ('"num_epochs": 3,', '"num_epochs": 1000,'),
           ("            optimizer.zero_grad()\n",
            "            optimizer.zero_grad()\n"
            "            print(f\"[{epoch}/{num_epochs}][{step}/{len(train_dataloader)}]\", flush=True)\n")]
_WORKERS = ("num_workers=4)", "num_workers=12)")
#: GD102's snippet as its rule file writes it (both loaders): the CPUs less 2 (14 on the H200's 16)
_GD102 = ("num_workers=4)", "num_workers=max(1, min(16, len(os.sched_getaffinity(0)) - 2)), pin_memory=True, "
          "persistent_workers=True, prefetch_factor=4)")
#: the snippet before 4 Dec 2026 (run1 and run2's "gd102"): 8 workers
_GD102_8 = ("num_workers=4)", "num_workers=8, pin_memory=True, persistent_workers=True, prefetch_factor=4)")
_PERSISTENT = ("num_workers=4)", "num_workers=4, persistent_workers=True)")

#: variant -> (edits to cv_example.py, ``accelerate launch`` flags); ``name#2`` runs a variant again
VARIANTS: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "as_is": ([], []),
    "workers_12": ([_WORKERS], []),
    "persistent": ([_PERSISTENT], []),
    "gd102": ([_GD102], []),
    "gd102_8": ([_GD102_8], []),
    "bf16": ([], ["--mixed_precision", "bf16"]),
    "compile": ([], ["--dynamo_backend", "inductor"]),
    "gd102_bf16": ([_GD102], ["--mixed_precision", "bf16"]),
    "gd102_compile": ([_GD102], ["--dynamo_backend", "inductor"]),
    "gd102_bf16_compile": ([_GD102], ["--mixed_precision", "bf16", "--dynamo_backend", "inductor"]),
}


def variant(name: str) -> str:
    base = patchruns.variant_of(name)
    if base not in VARIANTS:
        raise SystemExit(f"no variant {base!r}: one of {', '.join(VARIANTS)}")
    return base


def command(python: str, work: Path, original: str, name: str, data: Path) -> tuple[list[str], Path]:
    """``accelerate launch`` of the variant's copy of cv_example.py, and the folder it runs in."""
    edits, flags = VARIANTS[variant(name)]
    folder = work / name.replace("#", "_")
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "cv_example.py"
    script.write_text(patchruns.patched(original, [*_ALWAYS, *edits], "cv_example.py"))
    # launch's own defaults, said explicitly (it warns about each one it has to assume)
    launch = {"--num_processes": "1", "--num_machines": "1", "--mixed_precision": "no", "--dynamo_backend": "no"}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        launch[flag] = value
    cmd = [python, "-m", "accelerate.commands.launch", *(x for kv in launch.items() for x in kv),
           str(script), "--data_dir", str(data)]
    return cmd, folder


def _cpu_topology() -> str:
    """lscpu's topology lines, and how many distinct cores the CPUs sit on (sysfs)."""
    import subprocess

    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = [ln.strip() for ln in out.splitlines()
            if ln.split(":")[0].strip() in ("CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
                                            "Model name")]
    cores = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        try:
            cores.add(((cpu / "topology/physical_package_id").read_text().strip(),
                       (cpu / "topology/core_id").read_text().strip()))
        except OSError:
            continue
    return "; ".join(keep) + f"; distinct cores in sysfs: {len(cores)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scripts", type=Path, required=True, help="folder with accelerate/cv_example.py")
    p.add_argument("--seconds", type=float, default=20.0, help="timed seconds per plain run")
    p.add_argument("--warmup", type=float, default=25.0, help="seconds before timing")
    p.add_argument("--compile-warmup", type=float, default=120.0,
                   help="seconds more before timing a compile variant (its first run of 85 s timed only 1.2 s)")
    p.add_argument("--duration", type=float, default=40.0, help="gpudoctor run --duration")
    p.add_argument("--variants", default="as_is,gd102,bf16,compile,persistent,workers_12")
    p.add_argument("--diagnose", default="as_is,gd102",
                   help="variants also run under gpudoctor (once each, right after the first plain run of the name)")
    p.add_argument("--baseline", default="as_is", help="variant the table divides by (the mean of its runs)")
    p.add_argument("--budget-s", type=float, default=540.0, help="skip what would end after this many seconds")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = p.parse_args(argv)
    started = time.monotonic()
    procs.install_cleanup()
    original = (args.scripts / "accelerate" / "cv_example.py").read_text()
    python = sys.executable
    gpudoctor = [python, "-m", "gpudoctor"]
    names = [v for v in args.variants.split(",") if v]
    for name in names:
        variant(name)  # a misspelt name fails here, not after the runs before it
    to_diagnose = {variant(v) for v in args.diagnose.split(",") if v}
    results: dict[str, Any] = {}
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gd_acc_cv_") as tmp:
        work = Path(tmp)
        print(f"cpus: {_cpu_topology()}", flush=True)
        data = datagen.labelled_jpegs(work / "pets", labels=37, per_label=200)
        print(f"{time.strftime('%H:%M:%S')} data: {len(list(data.glob('*.jpg')))} JPEGs in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        for name in names:
            warm = args.warmup + (args.compile_warmup if "compile" in variant(name) else 0.0)
            diag_s = args.duration + 30.0 if variant(name) in to_diagnose else 0.0
            if time.monotonic() - started + warm + args.seconds + 10.0 + diag_s > args.budget_s:
                print(f"{time.strftime('%H:%M:%S')} skipped {name}: over --budget-s", flush=True)
                continue
            cmd, folder = command(python, work, original, name, data)
            diagnose = variant(name) in to_diagnose
            to_diagnose.discard(variant(name))
            results[name] = patchruns.measure(name, cmd, folder, _PROGRESS, args.seconds, warm,
                                              args.duration if diagnose else None, gpudoctor, work, args.out,
                                              "acc_cv", BATCH, sample_cpu=True)
    (args.out / "accelerate_cv_validation.json").write_text(json.dumps(results, indent=1))
    patchruns.print_rate_table(results, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
