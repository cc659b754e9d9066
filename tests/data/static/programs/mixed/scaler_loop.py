import torch


def main(model, loader, optimizer, loss_scaler):
    model.cuda()
    for x, y in loader:  # GD201: backward runs inside timm's NativeScaler call
        loss = model(x.cuda(), y.cuda())
        loss_scaler(loss, optimizer, parameters=model.parameters())


if __name__ == "__main__":
    main(None, None, None, None)
