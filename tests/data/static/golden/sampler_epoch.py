import torch
from torch.utils.data import DataLoader, DistributedSampler
from torch.utils.data.distributed import DistributedSampler as DS


def train(model, train_set, val_set, epochs):
    sampler = DistributedSampler(train_set)
    val_sampler = DistributedSampler(val_set)
    fixed = DS(train_set, shuffle=False)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    other = DataLoader(train_set, sampler=DS(train_set, shuffle=True))
    for epoch in range(epochs):
        for x, y in loader:
            model(x.cuda()).sum().backward()
    return val_sampler, fixed, other
