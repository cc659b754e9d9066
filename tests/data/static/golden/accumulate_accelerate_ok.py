from accelerate import Accelerator


def train(model, optimizer, loader, accum):
    accelerator = Accelerator(gradient_accumulation_steps=accum)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for step, batch in enumerate(loader):
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch).loss)
            if step % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
