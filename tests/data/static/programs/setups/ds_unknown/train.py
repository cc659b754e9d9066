import deepspeed


def main(model, loader, optimizer):
    # no GD201: the config is built by code this check cannot read, so the precision is unknown
    model, optimizer, _, _ = deepspeed.initialize(model=model, config=build_config())  # noqa: F821
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, None, None)
