"""What a run writes for people to read: the TensorBoard event files and the HParams row
(tensorboard.py) and the tags of its scalars (tags.py); the trackers are callbacks
(recrunner.training.callbacks.trackers)."""
