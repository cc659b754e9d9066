import torch as t
import torch.nn as nn
from torch.optim import SGD

t.backends.cudnn.benchmark = False
t.autograd.set_detect_anomaly(True)
t.autograd.set_detect_anomaly(False)
block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
no_bias = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8))
opt = SGD([], lr=0.1, foreach=False)
opt_ok = t.optim.Adam([], foreach=True)
opt.zero_grad(set_to_none=False)
opt.zero_grad()
state = t.load("ckpt.pt")
state_ok = t.load("ckpt.pt", weights_only=True)
x = t.zeros(3).to("cuda")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3)
        self.bn = nn.BatchNorm2d(8)
