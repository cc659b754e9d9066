import torch


def resume(path):
    state = torch.load(path)  # GD802: pass weights_only=True (a state dict)
    return state["model"]


def serve(path, x):
    model = torch.load(path)  # GD802: a whole pickled model; weights_only=True would fail
    model.eval()
    return model(x)


def trusted(path):
    return torch.load(path, weights_only=False)  # said explicitly: no finding


def allowed(path, Net):
    with torch.serialization.safe_globals([Net]):
        model = torch.load(path)  # GD802: weights_only=True works here (the class is allowed): say so
    return model.eval()
