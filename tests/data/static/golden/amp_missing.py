import torch


def train(model, loader, optimizer):
    model.cuda()
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


def evaluate(model, loader):
    for x, _ in loader:
        model(x.cuda())
