import torch
from torch.cuda.amp import autocast


def train(model, loader, optimizer):
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = model(x.cuda(), y.cuda())
            loss.backward()
        optimizer.step()


def train_legacy(model, loader, optimizer):
    for x, y in loader:
        with autocast():
            loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


def train_bf16(model, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(x)


def train_off(model, x):
    with torch.autocast("cuda", enabled=False):
        return model(x)


@torch.cuda.amp.custom_fwd
def custom(x):
    return x
