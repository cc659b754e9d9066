import torch


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:  # no GD201: main_amp.py runs this under autocast
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
