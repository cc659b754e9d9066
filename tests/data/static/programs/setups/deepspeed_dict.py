import deepspeed


def main(model, loader, optimizer):
    config = {"train_batch_size": 8, "bf16": {"enabled": True}}  # no GD201
    model, optimizer, _, _ = deepspeed.initialize(model=model, config=config)
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
