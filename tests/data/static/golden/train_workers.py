# Gives the deployment fixtures a training script whose DataLoader uses workers.
import torch
from torch.utils.data import DataLoader

loader = DataLoader(range(8), num_workers=4, pin_memory=True, persistent_workers=True)
device = torch.device("cuda")
