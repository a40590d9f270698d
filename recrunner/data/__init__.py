"""Datasets: RecBole's atomic files found and checked, the shared data cache, and sequential
datasets built from array operations."""
