"""The smallest Hugging Face ``Trainer`` run: a GPT-2 model built from its config, synthetic tokens.

Why this exists: the transformers example scripts (``run_clm.py`` …) need the ``datasets`` package and
a download, neither of which the validation machine has, so no unmodified example can run there.
This driver does only what those scripts do before ``trainer.train()`` — a model from a config, a
tokenized dataset, ``TrainingArguments`` parsed from the command line with ``HfArgumentParser`` — so
every Trainer flag (``--bf16``, ``--torch_compile``, ``--dataloader_num_workers``, ``--tf32`` …)
works as in the examples, and every default is the Trainer's. The only addition is a callback that
prints each optimizer step's wall time (``step_time_ms=``) so the harness can compare it with
gpudoctor's step times.

    python hf_trainer_gpt2.py --output_dir /tmp/out --max_steps 100000 [--n_layer 12 …] [Trainer flags]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


@dataclass
class ModelArguments:
    n_layer: int = field(default=12)
    n_head: int = field(default=12)
    n_embd: int = field(default=768)
    seq_len: int = field(default=1024)
    vocab_size: int = field(default=50257)
    samples: int = field(default=100_000)
    # "" keeps transformers' default (sdpa); "eager" is the hand-written attention (issue 35's validation)
    attn_implementation: str = field(default="")


class SyntheticTokens(torch.utils.data.Dataset):
    """Random token ids, fixed per index (what a tokenized, grouped text dataset hands the Trainer)."""

    def __init__(self, samples: int, seq_len: int, vocab_size: int) -> None:
        self.samples, self.seq_len, self.vocab_size = samples, seq_len, vocab_size

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, self.vocab_size, (self.seq_len,), generator=g)
        return {"input_ids": ids, "labels": ids.clone()}


class StepTimes(TrainerCallback):
    def __init__(self) -> None:
        self.last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        print(f"step={state.global_step} step_time_ms={(now - self.last) * 1000:.2f}", flush=True)
        self.last = now


def main() -> None:
    model_args, train_args = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()
    config = GPT2Config(n_layer=model_args.n_layer, n_head=model_args.n_head, n_embd=model_args.n_embd,
                        n_positions=model_args.seq_len, vocab_size=model_args.vocab_size)
    impl = model_args.attn_implementation
    model = GPT2LMHeadModel._from_config(config, attn_implementation=impl) if impl else GPT2LMHeadModel(config)
    data = SyntheticTokens(model_args.samples, model_args.seq_len, model_args.vocab_size)
    trainer = Trainer(model=model, args=train_args, train_dataset=data, callbacks=[StepTimes()])
    trainer.train()


if __name__ == "__main__":
    main()
