#!/bin/bash
cat > env.sh <<EOF
export NCCL_P2P_DISABLE=1
EOF
cat <<-"END" >> notes.txt
	export NCCL_IB_DISABLE=1
	END
torchrun --nproc-per-node 8 train.py
