import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

model = DDP(torch.nn.Linear(4, 4).cuda())
loader = DataLoader(range(8), batch_size=2, num_workers=2, pin_memory=True, persistent_workers=True)
sharded = DataLoader(range(8), batch_sampler=my_batch_sampler, num_workers=2, pin_memory=True,  # noqa: F821
                     persistent_workers=True)
