"""RecBole's model trainers under recrunner's one loop: the layers for NCL and the pre-training
stages (layers.py) and the gradient-boosted trees (trees.py)."""
