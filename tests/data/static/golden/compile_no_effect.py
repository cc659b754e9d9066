"""GD404: torch.compile calls whose compiled module never runs (issue 34)."""
import deepspeed
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import Trainer, TrainingArguments


def hf_trainer(model, data):
    trainer = Trainer(model=model, args=TrainingArguments("out"), train_dataset=data)
    model = torch.compile(model)  # the Trainer holds the uncompiled model
    trainer.train()


def hf_trainer_built_again(model, data):
    trainer = Trainer(model=model, train_dataset=data)
    model = torch.compile(model)
    trainer = Trainer(model=model, train_dataset=data)  # takes the compiled one: fine
    trainer.train()


def ddp_kept_uncompiled(model, loader, rank):
    ddp_model = DDP(model, device_ids=[rank])
    if True:
        model = torch.compile(model)
    for x in loader:
        ddp_model(x).sum().backward()


def compile_then_wrap(model, rank):
    model = torch.compile(model)  # nanoGPT's order: fine
    model = DDP(model, device_ids=[rank])
    model = DDP(model.module, device_ids=[rank])
    model = torch.compile(model)  # the DDP wrapper itself is compiled: fine
    return model


def deepspeed_engine(model, params, batch):
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=params)
    model = torch.compile(model)
    engine.backward(engine(batch))


def accelerate_prepared(accelerator, model, optimizer):
    model, optimizer = accelerator.prepare(model, optimizer)
    model = torch.compile(model)  # compiles what prepare returned: fine
    return model, optimizer


def dropped(model):
    torch.compile(model)  # the result is thrown away
    model.compile()  # nn.Module.compile() compiles in place: fine
    return model
