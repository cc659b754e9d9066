# No CUDA anywhere in this file: DataLoader settings for GPU copies do not apply.
from torch.utils.data import DataLoader

loader = DataLoader(range(10), batch_size=2)
