"""ResNet-50 trained the way most image-classification loops are written: torchvision's model, SGD.

Why this exists: the classic sequence (issue 12) — ResNet-50, batch 256, eager fp32, then each fix
gpudoctor names, in its order — was measured on timm's ``benchmark.py``, which synchronizes the GPU
after every step to time it (a host round trip per step that no fix removes). This driver is the
loop of torchvision's reference ``train.py`` with its data already on the GPU and none of that timing:
``model(images)``, cross entropy, ``loss.backward()``, ``optimizer.step()``, ``zero_grad``, the loss
read every ``--log-every`` steps. Each fix gpudoctor can name is one flag, as a user would write it:

    --bf16            torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss
    --channels-last   model and input in torch.channels_last
    --compile         torch.compile(model)      [--compile-mode reduce-overhead|max-autotune…]

Each optimizer step's wall time is printed (``step_time_ms=``) so the harness can compare it with
gpudoctor's step times; the steady state of a loop without syncs is the GPU's rate (the host runs
ahead until the launch queue is full).

    python torchvision_resnet50.py [--batch 256] [--steps 100000] [--bf16] [--channels-last] [--compile]
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
import torchvision


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--device", default="cuda")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default=None)
    args = p.parse_args()

    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True            # torchvision's train.py does the same
    model = torchvision.models.get_model(args.arch, num_classes=args.classes).to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    step_model = torch.compile(model, mode=args.compile_mode) if args.compile else model
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=memory_format)
    target = torch.randint(0, args.classes, (args.batch,), device=device)

    def autocast() -> contextlib.AbstractContextManager[object]:
        if args.bf16:
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    model.train()
    last = time.perf_counter()
    for step in range(1, args.steps + 1):
        with autocast():
            loss = F.cross_entropy(step_model(images), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % args.log_every == 0:
            print(f"step={step} loss={loss.item():.4f}", flush=True)
        now = time.perf_counter()
        print(f"step={step} step_time_ms={(now - last) * 1000:.2f}", flush=True)
        last = now


if __name__ == "__main__":
    main()
