# the same double call as cudagraph_reuse.py, with the step marked: no GD310
import torch
netD = torch.compile(torch.nn.Linear(8, 1).cuda(), mode="reduce-overhead")
for real in []:
    torch.compiler.cudagraph_mark_step_begin()
    netD(real).sum().backward()
    netD(real).sum().backward()
