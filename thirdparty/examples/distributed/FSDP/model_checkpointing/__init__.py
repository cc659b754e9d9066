from .checkpoint_handler import (
    load_model_checkpoint,
    save_model_checkpoint,
    save_distributed_model_checkpoint,
    load_distributed_model_checkpoint,
    load_optimizer_checkpoint,
    save_optimizer_checkpoint,
    save_model_and_optimizer_sharded,
    load_model_sharded,
)
