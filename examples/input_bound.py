"""Planted problem: the GPU waits for the input pipeline (expected finding: GD102 input-bound).

Every sample costs real CPU time to "decode" (a busy loop standing in for JPEG decoding and
augmentation), and the DataLoader runs that work in the training process itself
(``num_workers=0``), with pageable memory and no prefetching. The GPU (or the CPU model) sits idle
while the next batch is built.

Fix (``--fix``): decode in worker processes (``num_workers``), keep them alive between epochs,
prefetch, pin host memory and copy with ``non_blocking=True``::

    DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True,
               persistent_workers=True, prefetch_factor=4)

Sizing (CUDA): building one batch (128 samples: 0.05 ms of "decode" plus ~0.1 ms to make each
sample's tensors, then the collate) costs ~20 ms on one core, about 3x a training step of the
width-128 conv net, so the unfixed loop waits for data ~75% of each step, while the fix's 8
workers (8: GD102's snippet asks for the CPUs less 2, at most 16) build ~2x more batches per second than the GPU
consumes. The first H200 run (1 ms x 64 samples per batch, a much cheaper step) was 7.8x faster
with 8 workers yet still loader-bound. More workers would not be healthier: with torch's 16
intra-op threads on a 16-core host, 9+ busy workers oversubscribe the CPU (GD305). Apart from the
loader the job is healthy (bf16 autocast, TF32, channels_last, cuDNN autotuner).

Used by ``gpudoctor demo`` (runs forever with ``--steps 0``).
"""

from __future__ import annotations

import os

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


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--cpu-ms-per-sample", type=float, default=None,
                        help="CPU cost of building one sample (default: 0.05 on CUDA, 1.5 on CPU)")
    parser.add_argument("--io-ms-per-sample", type=float, default=0.0,
                        help="time each sample waits on slow storage (a sleep: no CPU; default 0)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader workers with --fix (default: min(8, cores - 1))")
    args = parser.parse_args()
    device = setup(args, "input_bound")
    on_cuda = device.type == "cuda"
    healthy_cuda_defaults(device)
    batch_size = args.batch_size or (128 if on_cuda else 32)
    cpu_ms = args.cpu_ms_per_sample if args.cpu_ms_per_sample is not None else (0.05 if on_cuda else 1.5)
    side = 64 if on_cuda else 32
    dataset = SyntheticImages(length=batch_size * 50, shape=(3, side, side), classes=10, cpu_ms_per_sample=cpu_ms,
                              io_ms_per_sample=args.io_ms_per_sample)

    if args.fix:
        workers = args.workers or max(1, min(8, (os.cpu_count() or 2) - 1))
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                                             num_workers=workers, pin_memory=on_cuda,
                                             persistent_workers=True, prefetch_factor=4)
    else:
        workers = 0
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)

    model = channels_last(SmallConvNet(width=128 if on_cuda else 16, blocks=3).to(device), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batches = forever(loader)

    def step(_: int) -> None:
        images, labels = next(batches)
        images = nhwc(images.to(device, non_blocking=args.fix))
        labels = labels.to(device, non_blocking=args.fix)
        optimizer.zero_grad(set_to_none=True)
        with bf16_autocast(device):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    result = run_steps(args, device, step)
    report("input_bound", args, device, result, workers=workers, batch_size=batch_size)


if __name__ == "__main__":
    main()
