"""Fast mode: what it does for a run on its device (plan.py: `FastPlan`, `choose`, the measured
limits) and carrying it out (apply.py: the model's methods compiled, autocast, fp16's scaled loss)."""
