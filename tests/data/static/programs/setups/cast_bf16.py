import torch


def main(model, loader, optimizer):
    model = model.cuda().bfloat16()  # weights cast: no GD201
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
