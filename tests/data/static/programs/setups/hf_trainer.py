from transformers import Trainer, TrainingArguments


def main(model, dataset):
    args = TrainingArguments("out", bf16=True, dataloader_num_workers=4, torch_compile=True)
    Trainer(model=model, args=args, train_dataset=dataset).train()


if __name__ == "__main__":
    main(None, None)
