import torch
from torch.utils.data import DataLoader

torch.cuda.manual_seed_all(0)  # names torch.cuda, puts nothing on a GPU


def main(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=8)  # no GD102/GD105: the batches stay on the CPU
    for x, y in loader:  # no GD201: a CPU-only script
        loss = model(x, y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
