import torch
from torch import nn

netD = nn.Linear(8, 1).cuda()
netG = nn.Linear(4, 8).cuda()
netD = torch.compile(netD, mode="reduce-overhead")
netG = torch.compile(netG, mode="max-autotune")
fused = torch.compile(nn.Linear(8, 8).cuda())  # default mode: no CUDA graphs, called twice below
criterion = nn.BCEWithLogitsLoss()


def train(loader, noise, fixed_noise):
    for real in loader:
        errD_real = criterion(netD(real), torch.ones(len(real), 1, device="cuda"))
        errD_real.backward()
        fake = netG(noise)
        errD_fake = criterion(netD(fake.detach()), torch.zeros(len(real), 1, device="cuda"))
        errD_fake.backward()
        errG = criterion(netD(fake), torch.ones(len(real), 1, device="cuda"))
        errG.backward()
        picture = netG(fixed_noise).detach()  # after the last backward: not counted
        fused(fused(real)).sum()
        for _ in range(2):
            netG(noise)  # one call per inner iteration: judged on its own
    return picture


@torch.compile(mode="reduce-overhead")
def body(x):
    return x * 2


def step_function(x):
    loss = body(x).sum() + body(x + 1).sum()
    loss.backward()
