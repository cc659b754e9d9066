from accelerate import Accelerator


def train(model, optimizer, loader, accum):
    accelerator = Accelerator()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for step, batch in enumerate(loader):
        loss = model(**batch).loss / accum
        accelerator.backward(loss)
        if step % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
