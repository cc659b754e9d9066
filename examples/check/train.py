"""A small CUDA training script with the mistakes `gpudoctor check` looks for (do not copy it)."""

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.bn = nn.BatchNorm2d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        if x.mean() > 0:
            print("positive activations")
        return self.head(x.mean(dim=(2, 3)))


def main() -> None:
    dist.init_process_group("gloo")
    device = torch.device("cuda", dist.get_rank())
    images = np.load("/data/train_images.npy")
    labels = np.load("/data/train_labels.npy")
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8)
    val_loader = DataLoader(dataset, batch_size=256)
    model = Net().to(device)
    model = torch.compile(model)
    model = DDP(model, find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    scaler = torch.cuda.amp.GradScaler()
    torch.autograd.set_detect_anomaly(True)
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        weights = torch.tensor([1.0] * 10).cuda()
        out = model(x)
        loss = nn.functional.cross_entropy(out, y, weight=weights)
        loss.backward()
        if step % 4 == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        print(f"step {step} loss {loss}")
        torch.cuda.synchronize()
    torch.save(model.state_dict(), "model.pt")
    state = torch.load("model.pt")
    print(len(state), scaler, len(val_loader))


if __name__ == "__main__":
    main()
