"""The training loop: CustomTrainer.fit, its state, checkpoints, callbacks and trainer families."""
