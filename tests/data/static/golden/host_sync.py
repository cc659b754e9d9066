import torch


def train(model, loader, optimizer):
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        weights = torch.ones(10).cuda()
        on_device = torch.ones(10, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y, weights, on_device)
        loss.backward()
        optimizer.step()
        total += loss.item()
        preds = model.last.argmax(1).cpu().numpy()
        print("step", step, loss)
        print("step", step)
        torch.cuda.synchronize()
        if step % 100 == 0:
            print(loss.item())
        for p in model.parameters():
            p.grad.norm().item()
    print(loss.item(), preds)
    return total


def step_fn(model, x, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    loss.backward()
    optimizer.step()
    return loss.item()


def wrapped(model, loader, optimizer):
    losses = []
    for step, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x.cuda(), y.cuda())
        backward_and_step(loss, optimizer, clip=1.0)
        losses.append(loss.item())
        if step % 50 == 0:
            for p in model.parameters():
                print(p.grad.norm().item())
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.data.norm().item()
        norms = sum(p.grad.norm().item() for p in model.parameters())
    return losses, norms


def epochs(model, optimizer):
    for epoch in range(3):
        loss = model.evaluate()
        save_checkpoint(loss, optimizer)
        print(loss.item())
