import torch
from torch.utils.data import DataLoader as DL

device = torch.device("cuda")
plain = DL(range(10), batch_size=2)
tuned = DL(range(10), batch_size=2, num_workers=4, pin_memory=True, persistent_workers=True)
not_persistent = DL(range(10), num_workers=4, pin_memory=True)
dynamic = DL(range(10), num_workers=args.workers, pin_memory=args.pin, persistent_workers=True)  # noqa: F821
from_kwargs = torch.utils.data.DataLoader(range(10), **loader_kwargs)  # noqa: F821
