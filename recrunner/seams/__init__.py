"""Every place recrunner changes RecBole 1.2.1's behaviour from outside, one module per seam.

Nothing here edits the installed package: each seam wraps, sets back or supplies something at
one call site, and its module's docstring has the table of what RecBole does and what recrunner
does instead. docs/design.md (Seams) also lists the RecBole methods the trainer overrides or
calls, which live with the trainer (recrunner/training/: trainer.py, families.py, trees.py).

| module        | RecBole's                                                    | why                                   |
|---------------|--------------------------------------------------------------|---------------------------------------|
| environment   | names numpy 2 and scipy 1.13 removed; pandas 3; its ray pin  | Python 3.10-3.13, today's numpy/scipy |
| config        | Config reading sys.argv; ml-100k's data_path; the tree yamls | explicit inputs only                  |
| models        | get_model's anomaly detection; KSR's dtype; torch_scatter    | speed; models that fail otherwise     |
| tensorboard   | Trainer.__init__'s cwd-relative writer                       | one event file per run                |
| device        | Config._init_device: CUDA_VISIBLE_DEVICES, then a CUDA query | the run's gpu_id holds, GPU 0 is free |
| evaluator     | Evaluator.evaluate keeps only means                          | per-user values for significance      |
| collector     | Collector: per-batch top-k bookkeeping, a growing torch.cat  | speed, the same tensors               |
| dataset       | create_dataset's class choice; Dataset.build per run; the    | the shared data cache, stored compact |
|               | history lists data_augmentation fills                        |                                       |
| loaders       | per-element Python loops of collate, join and negatives      | speed, identical batches              |
| batch_order   | torch's DataLoader handing each batch's rows over one by one | speed, the same rows and generator    |
| replay        | every validation building the batches the one before built   | speed, the same batches and generator |
| negatives     | Sampler: uniform draws on the host, used ones drawn again    | fast mode: no host work a batch (GPU) |
| torch_scatter | (KGIN, MCCLK) torch_scatter's scatter_mean, scatter_softmax  | no wheel for this torch on PyPI       |

One seam lives with the layer it serves: RecBole's `SequentialDataset.data_augmentation` (its
Python loop and whole-dataset history lists) is replaced by array operations in
recrunner/data/augmentation.py, whose recipes the data cache stores (data/compact.py).
"""
