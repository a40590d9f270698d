"""Checkpoints: the file format and the device boundary (files.py), what each checkpoint holds and
how a run resumes (checkpointer.py), the training state saved whole (state.py), every RNG (rng.py)
and a model's state beyond its state_dict (model_state.py)."""
