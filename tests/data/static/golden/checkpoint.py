from torch.utils.checkpoint import checkpoint, checkpoint_sequential


def forward(blocks, x):
    x = checkpoint(blocks[0], x)
    x = checkpoint(blocks[1], x, use_reentrant=True)
    x = checkpoint(blocks[2], x, use_reentrant=False)
    x = checkpoint(blocks[3], x, **options)  # noqa: F821
    return checkpoint_sequential(blocks, 2, x, use_reentrant=False)



layers = [block.cuda() for block in ()]  # the module puts work on a GPU: GPU-performance rules judge it
