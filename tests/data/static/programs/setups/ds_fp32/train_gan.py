import deepspeed


def main(model, loader, optimizer):
    model, optimizer, _, _ = deepspeed.initialize(args=None, model=model)  # GD201 below: the config beside sets no bf16/fp16
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
