#!/bin/sh
# Starts the training container on one node.
export NCCL_DEBUG=TRACE
docker run --gpus all --rm \
  -v "$PWD:/app" registry.example.com/train:1.4.2 \
  python -m torch.distributed.launch --nproc_per_node=8 /app/train.py
