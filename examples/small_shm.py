"""Planted problem: DataLoader workers with a tiny /dev/shm (expected finding: GD103 small-shared-memory).

DataLoader workers hand batches to the training process through shared memory (/dev/shm). Docker
gives containers 64 MiB by default; a few large batches in flight fill it, and the job dies with
"DataLoader worker (pid X) is killed by signal: Bus error" or "No space left on device" — often
only when a bigger batch or more workers are tried.

This script reproduces the container: unfixed, it re-executes itself (same PID) in a private mount
namespace with a ``--shm-mib`` (default 64) tmpfs on /dev/shm. That needs root (or CAP_SYS_ADMIN)
and ``unshare``; without them it says so on stderr and runs with the machine's /dev/shm.
The default batch fits; ``--batch-size 256`` shows the crash.

Fix (``--fix``): give the job a real /dev/shm — here: no small mount. In deployments::

    docker run --shm-size=8g …   |   compose: shm_size: "8gb"   |   docker run --ipc=host …
    k8s: volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}] mounted at /dev/shm
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import torch
from _common import (
    SmallConvNet,
    SyntheticImages,
    bf16_autocast,
    channels_last,
    forever,
    healthy_cuda_defaults,
    make_parser,
    nhwc,
    report,
    run_steps,
    setup,
)
from torch import nn

_MARK = "GPUDOCTOR_EXAMPLE_SMALL_SHM"


def _reexec_with_small_shm(shm_mib: int) -> None:
    """Replace this process (same PID) with itself inside a mount namespace with a small /dev/shm."""
    if os.environ.get(_MARK):
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("gpudoctor-example: cannot make a small /dev/shm here (needs root and unshare); "
              "running with the machine's /dev/shm.", file=sys.stderr)
        return
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /dev/shm"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:  # e.g. a container without CAP_SYS_ADMIN
        print(f"gpudoctor-example: cannot make a small /dev/shm here ({probe.stderr.strip()[:120]}); "
              "running with the machine's /dev/shm.", file=sys.stderr)
        return
    os.environ[_MARK] = str(shm_mib)
    script = f'mount -t tmpfs -o size={shm_mib}m tmpfs /dev/shm && exec "$@"'
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                          sys.executable, *sys.argv])


def shm_total_mib() -> float:
    stat = os.statvfs("/dev/shm")
    return stat.f_blocks * stat.f_frsize / 2**20


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--shm-mib", type=int, default=64, help="size of the small /dev/shm (default: 64)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not args.fix:
        _reexec_with_small_shm(args.shm_mib)
    device = setup(args, "small_shm")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch = args.batch_size or 16
    side = 128
    dataset = SyntheticImages(length=batch * 40, shape=(3, side, side), classes=10, cpu_ms_per_sample=0.2)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True,
                                         num_workers=args.workers, pin_memory=on_cuda,
                                         persistent_workers=True, prefetch_factor=2)
    model = channels_last(nn.Sequential(nn.AvgPool2d(4), SmallConvNet(width=16, blocks=2)).to(device), device)  # cheap: the loader is the point
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batches = forever(loader)

    def step(_: int) -> None:
        images, labels = next(batches)
        images = nhwc(images.to(device, non_blocking=True))
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    mib_per_batch = batch * 3 * side * side * 4 / 2**20
    report("small_shm", args, device, result, batch_size=batch, workers=args.workers,
           shm_total_mib=f"{shm_total_mib():.0f}", batch_mib=f"{mib_per_batch:.1f}")


if __name__ == "__main__":
    main()
