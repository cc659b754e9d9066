import lightning as L


def main(model, loader, optimizer):
    fabric = L.Fabric(precision="bf16-true")  # no GD201
    model, optimizer = fabric.setup(model, optimizer)
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
