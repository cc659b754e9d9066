import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group(backend="gloo")
dist.init_process_group("nccl")
rank = dist.get_rank()
table = pd.read_csv("train.csv")
mapped = np.load("train.npy", mmap_mode="r")
if rank == 0:
    stats = np.load("stats.npy")
model = nn.DataParallel(nn.Linear(4, 4)).cuda()
ddp = DistributedDataParallel(nn.Linear(4, 4).cuda(), find_unused_parameters=True)
ddp_ok = DistributedDataParallel(nn.Linear(4, 4).cuda(), find_unused_parameters=False)
loader = DataLoader(range(8), sampler=DistributedSampler(range(8)), num_workers=2, pin_memory=True,
                    persistent_workers=True)


class Data(torch.utils.data.Dataset):
    def __getitem__(self, index):
        return np.load(f"item{index}.npy")


def train(optimizer, accum=4):
    for step, (x, y) in enumerate(loader):
        loss = ddp(x.cuda()).sum()
        loss.backward()
        if step % accum == 0:
            optimizer.step()
