import torch
from torch.utils.data import DataLoader


def test_backward_matches(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=2)  # no GD102/GD105: a test, not a training job
    for x, y in loader:  # no GD201 (a test), and its autocast("cpu") hides nothing elsewhere
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
    state = torch.load("ref.pt")  # GD802: correctness and security rules still apply to tests
    assert state
