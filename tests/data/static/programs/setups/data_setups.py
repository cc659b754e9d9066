import torch
from torch.utils.data import DataLoader, TensorDataset


def main(model, raw, features, labels, optimizer):
    model.cuda()
    features, labels = features.cuda(), labels.cuda()
    on_gpu = TensorDataset(features.cuda(), labels.to("cuda"))
    gpu_loader = DataLoader(on_gpu, batch_size=64, shuffle=True)  # no GD102/GD105: the tensors are on the GPU
    tokenized = raw.map(lambda rows: rows, batched=True)
    text_loader = DataLoader(tokenized["train"], batch_size=8)  # no GD102 (tokenized up front); GD105 as info
    host_loader = DataLoader(raw, batch_size=8)  # GD102 and GD105
    pinned = torch.empty(1024, dtype=torch.int32, pin_memory=True)
    for step in range(10):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            batch = pinned[step:step + 8].to("cuda", non_blocking=True)  # no GD302: a pinned buffer
            loss = model(batch)
        loss.backward()
        optimizer.step()
        logits = loss.detach().to("cpu", non_blocking=True)  # no GD302: a device-to-host copy
    return gpu_loader, text_loader, host_loader, logits


if __name__ == "__main__":
    main(None, None, None, None, None)
