#!/bin/bash
export NCCL_DEBUG=INFO
NCCL_P2P_DISABLE=1 torchrun train.py
docker run --gpus all train:1.0 python -m torch.distributed.launch train.py
docker run --gpus all --shm-size=8g train:1.0 torchrun train.py
docker run --gpus all --ipc host train:1.0 torchrun train.py
docker run --gpus all \
  --shm-size 128m train:1.0 torchrun train.py
docker run --rm busybox:1.36 true
