import torch

state = torch.load("a.pt")  # gpudoctor: ignore[GD802]
# gpudoctor: ignore[GD8]
state = torch.load("b.pt")
state = torch.load("c.pt")  # gpudoctor: ignore[GD301]
state = torch.load("d.pt")  # gpudoctor: ignore
