"""The loop: `CustomTrainer.fit` (trainer.py), what it was called with and where an epoch is
(context.py), one epoch (epoch.py) with its losses read in groups (losses.py), step schedules and
resuming within an epoch (steps.py), the one optimizer step
(optimizer.py), evaluation batches scored in parts (evaluation.py), the device's facts (device.py)
and the loop's log lines (output.py)."""
