from accelerate import Accelerator


def main(model, loader, optimizer):
    accelerator = Accelerator(mixed_precision="bf16")  # no GD201
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
