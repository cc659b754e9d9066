from torch.utils.data import DataLoader, DistributedSampler


def train(model, train_set, epochs):
    loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set))
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            model(x.cuda()).sum().backward()


def one_pass(model, train_set):
    sampler = DistributedSampler(train_set)
    for x, y in DataLoader(train_set, sampler=sampler):
        model(x.cuda()).sum().backward()
