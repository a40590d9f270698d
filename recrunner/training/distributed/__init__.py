"""Data-parallel runs: the processes' collectives, exact evaluation and shared decisions (world.py),
the trainer's side of them (processes.py), and which batches a process iterates (iteration.py)."""
