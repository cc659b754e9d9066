import torch

device = torch.device("cuda")


def main(model, loader, optimizer):
    model.to(device)
    for x, y in loader:  # GD201: this script trains in fp32 on the GPU
        loss = model(x.to(device), y.to(device))
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
