import torch
from engine import train_one_epoch


def main(model, loader, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        train_one_epoch(model.cuda(), loader, optimizer)


if __name__ == "__main__":
    main(None, None, None)
