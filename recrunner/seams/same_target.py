"""FEARec's same-target sequences without a wait for the device per sequence (recrunner/seams/host_loops.py
installs it).

RecBole 1.2.1's `FEARec.calculate_loss` gives each training sequence of a batch a positive for its
supervised contrastive loss: another training sequence with the same target item, drawn with Python's
`random.choice` among the rows of that target (`same_item_index`), again without the row drawn while
the drawn row's history equals the batch row's and rows are left. It loops over the batch on the host:
per sequence an `.item()` and a `.to("cpu")` (on a GPU, two waits for the device), a `torch.equal`,
then 2 x batch-size tensors stacked and copied to the device.

Here the draws stay Python's `random.choice` over the same arrays in the same order, so the same numbers
are drawn and the same rows chosen; what changes is what surrounds them: the batch's targets and
histories cross to the host once, the histories are compared as numpy rows, the chosen rows are gathered
from the training set's columns at once and copied to the device in one piece. The loss after it is
RecBole's, in its order (its forward passes draw their dropout masks in the same order), so the loss
and its gradients are equal bit for bit (tests/test_host_loops.py; a run against plain RecBole's:
tests/test_model_equivalence.py).
"""

from __future__ import annotations

import random
import types

import numpy as np
import torch


def same_target_rows(targets: list[int], histories: np.ndarray, same_item_index: dict,
                     training_histories: np.ndarray) -> np.ndarray:
    """The training row RecBole's loop picks for each batch row: `random.choice` among the rows of its
    target; while the row drawn has the batch row's history and others are left, drawn again without it."""
    chosen = np.empty(len(targets), dtype=np.int64)
    for i, target in enumerate(targets):
        remaining = same_item_index[target]
        while True:
            drawn = random.choice(remaining)  # RecBole's draw: the same numbers from Python's generator
            if len(remaining) == 1 or not np.array_equal(training_histories[drawn], histories[i]):
                break
            remaining = remaining[remaining != drawn]
        chosen[i] = drawn
    return chosen


class SameTargetSequences:
    """RecBole's `FEARec.calculate_loss` for one model, its same-target sequences drawn by
    `same_target_rows` (module docstring)."""

    def __init__(self, model):
        self.model = model

    @torch.compiler.disable  # compiled, a break in the graph: Python's generator and numpy draw here
    def positives(self, interaction) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's same-target sequences and their lengths, on the batch's device, from the training
        set's columns as RecBole reads them at each batch."""
        model = self.model
        histories = model.dataset.inter_feat[model.ITEM_SEQ]
        rows = torch.from_numpy(same_target_rows(
            interaction[model.ITEM_ID].tolist(), interaction[model.ITEM_SEQ].cpu().numpy(),
            model.same_item_index, histories.numpy()))
        return histories[rows].to(model.device), model.dataset.inter_feat[model.ITEM_SEQ_LEN][rows].to(model.device)

    def calculate_loss(self, interaction):
        from recbole.data.interaction import Interaction

        sem_aug, sem_aug_lengths = self.positives(interaction)
        interaction.update(Interaction({"sem_aug": sem_aug, "sem_aug_lengths": sem_aug_lengths}))
        return fearec_loss(self.model, interaction, sem_aug, sem_aug_lengths)

    @classmethod
    def methods(cls, model) -> tuple:
        """`calculate_loss` bound to the model, as fast mode's compiler expects of a model's methods."""
        same_target = cls(model)

        def calculate_loss(model, interaction):
            return same_target.calculate_loss(interaction)

        return (types.MethodType(calculate_loss, model),)


def fearec_loss(model, interaction, sem_aug, sem_aug_lengths):
    """RecBole's `FEARec.calculate_loss` after its loop, as it is."""
    item_seq, item_seq_len = interaction[model.ITEM_SEQ], interaction[model.ITEM_SEQ_LEN]
    seq_output = model.forward(item_seq, item_seq_len)
    pos_items = interaction[model.POS_ITEM_ID]
    if model.loss_type == "BPR":
        neg_items = interaction[model.NEG_ITEM_ID]
        pos_score = torch.sum(seq_output * model.item_embedding(pos_items), dim=-1)
        neg_score = torch.sum(seq_output * model.item_embedding(neg_items), dim=-1)
        loss = model.loss_fct(pos_score, neg_score)
    else:
        logits = torch.matmul(seq_output, model.item_embedding.weight.transpose(0, 1))
        loss = model.loss_fct(logits, pos_items)

    def nce(first, second):
        logits, labels = model.info_nce(first, second, temp=model.tau, batch_size=item_seq_len.shape[0], sim=model.sim)
        return model.aug_nce_fct(logits, labels)

    if model.ssl in ["us", "un"]:  # unsupervised
        loss += model.lmd * nce(seq_output, model.forward(item_seq, item_seq_len))
    if model.ssl in ["us", "su"]:  # supervised
        loss += model.lmd_sem * nce(seq_output, model.forward(sem_aug, sem_aug_lengths))
    if model.ssl == "us_x":
        aug_seq_output = model.forward(item_seq, item_seq_len)
        sem_aug_seq_output = model.forward(sem_aug, sem_aug_lengths)
        loss += model.lmd_sem * nce(aug_seq_output, sem_aug_seq_output)
        if model.fredom:  # the frequency domain's loss
            seq_output_f = torch.fft.rfft(seq_output, dim=1, norm="ortho")
            aug_seq_output_f = torch.fft.rfft(aug_seq_output, dim=1, norm="ortho")
            sem_aug_seq_output_f = torch.fft.rfft(sem_aug_seq_output, dim=1, norm="ortho")
            if model.fredom_type in ["us", "un"]:
                loss += 0.1 * abs(seq_output_f - aug_seq_output_f).flatten().mean()
            if model.fredom_type in ["us", "su"]:
                loss += 0.1 * abs(seq_output_f - sem_aug_seq_output_f).flatten().mean()
            if model.fredom_type == "us_x":
                loss += 0.1 * abs(aug_seq_output_f - sem_aug_seq_output_f).flatten().mean()
    return loss
