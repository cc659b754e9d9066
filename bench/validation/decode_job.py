#!/usr/bin/env python3
"""A ResNet-18 training job that decodes its images in the training process (``--workers 0``).

The input side of issue 36's Lightning job without Lightning: JPEG bytes made once in memory, decoded
and augmented per sample in ``__getitem__`` (PIL + torchvision transforms where installed), so with
``num_workers=0`` the main process is busy in Python/C decoding between steps. Prints progress lines
in DCGAN's format, ``[epoch/epochs][i/len]``, one per step, which bench/validation/realscripts/patchruns.py
times.

Without torchvision or PIL (this project's CPU machine), ``--tiny`` stands in with a zlib-compressed
raw image decoded with numpy and a small conv net: the same shape of job, not the same costs.

    python bench/validation/decode_job.py --workers 0 --device cuda       # GPU: ResNet-18, 224 px
    python bench/validation/decode_job.py --tiny --workers 0 --device cpu # CPU stand-in
"""

from __future__ import annotations

import argparse
import io
import time
import zlib

import torch
from torch.utils.data import DataLoader, Dataset

try:
    import torchvision
    from PIL import Image
    HAVE_VISION = True
except ImportError:  # the CPU machine: the numpy stand-in
    HAVE_VISION = False


class EncodedImages(Dataset):  # type: ignore[type-arg]
    """``count`` images kept encoded (JPEG, or zlib without PIL); each sample is decoded and augmented."""

    def __init__(self, count: int, size: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.size = size
        self.blobs: list[bytes] = []
        for _ in range(min(count, 64)):          # 64 distinct images, indexed modulo
            pixels = (torch.rand(size, size, 3, generator=g) * 255).to(torch.uint8).numpy()
            if HAVE_VISION:
                buf = io.BytesIO()
                Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
                self.blobs.append(buf.getvalue())
            else:
                self.blobs.append(zlib.compress(pixels.tobytes(), 6))
        self.count = count
        if HAVE_VISION:
            t = torchvision.transforms
            self.transform = t.Compose([t.RandomResizedCrop(size, antialias=True), t.RandomHorizontalFlip(),
                                        t.ToTensor(), t.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        blob = self.blobs[i % len(self.blobs)]
        if HAVE_VISION:
            return self.transform(Image.open(io.BytesIO(blob)).convert("RGB")), i % 10
        import numpy as np

        raw = zlib.decompress(blob)
        # the Python part of a decode/augment pipeline (a colour jitter drawn per sample, in Python)
        jitter = 0
        for k in range(0, 4000):
            jitter = (jitter * 31 + raw[k % len(raw)]) & 0xFFFF
        pixels = np.frombuffer(raw, dtype=np.uint8).reshape(self.size, self.size, 3)
        if i % 2:
            pixels = pixels[:, ::-1]
        x = torch.from_numpy(pixels.astype(np.float32) / 255.0).permute(2, 0, 1)
        return (x - 0.5) / 0.25, i % 10


def model_for(tiny: bool) -> torch.nn.Module:
    if HAVE_VISION and not tiny:
        return torchvision.models.resnet18(num_classes=10)
    if HAVE_VISION:
        return torchvision.models.resnet18(num_classes=10)   # small images keep it cheap
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="small images and model (CPU)")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--size", type=int, default=None, help="image side in pixels")
    p.add_argument("--samples", type=int, default=None, help="samples per epoch")
    p.add_argument("--epochs", type=int, default=100000)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = p.parse_args()
    size = args.size or (48 if args.tiny else 224)
    batch = args.batch or (16 if args.tiny else 64)
    samples = args.samples or batch * (40 if args.tiny else 200)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    loader = DataLoader(EncodedImages(samples, size), batch_size=batch, shuffle=True, num_workers=args.workers,
                        pin_memory=args.pin_memory, persistent_workers=args.persistent and args.workers > 0,
                        drop_last=True)
    model = model_for(args.tiny).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(args.epochs):
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i % 10 == 0:
                loss_value = loss.item()   # a log read every 10 steps, as a training script does
            else:
                loss_value = 0.0
            print(f"[{epoch}/{args.epochs}][{i}/{len(loader)}] loss {loss_value:.4f} t {time.monotonic():.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
