import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        print(x.shape)
        if x.sum() > 0:
            x = x * 2
        if x is None:
            return x
        scale = x.max().item()
        return x / scale


class Plain(nn.Module):
    def forward(self, x):
        print(x.shape)
        return x.item()


@torch.compile
def helper(x, limit):
    if x.norm() > limit:
        return x.tolist()
    return x


model = Net().cuda()
model = torch.compile(model)
plain = Plain().cuda()
