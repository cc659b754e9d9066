#!/bin/bash
# GD807 in a launch script: installed at every run (issue 34)
pip install torch
pip install torch==2.5.1 && torchrun --nproc_per_node=8 train.py
