"""RecBole's loops over a batch on the host replaced by array operations (recrunner/seams/host_loops.py):
SRGNN's and GCSAN's session graphs, HRM's inverted sequences, KGNNLS's smoothed labels and RippleNet's
scores, the same tensors as RecBole's bit for bit, and what a run uses.

A run's numbers against plain RecBole's for the five models: tests/test_model_equivalence.py.
"""

import re
import types

import pytest
import torch
from recbole.model.knowledge_aware_recommender import KGNNLS, RippleNet
from recbole.model.sequential_recommender import GCSAN, HRM, SASRec, SRGNN
from recbole.utils import get_model

from recrunner import Experiment, run_experiment
from recrunner.seams.host_loops import (LabelSmoothness, RippleSets, inverse_sequences, session_graph,
                                        without_host_loops)
from recrunner.seams.same_target import SameTargetSequences, same_target_rows

from .tiny_models import model_keys, tiny_params

_HOST = types.SimpleNamespace(device=torch.device("cpu"))  # all RecBole's methods below read of their model


def _sequences(seed: int, batch: int, length: int, items: int) -> torch.Tensor:
    """Left-aligned sequences padded with 0, as RecBole's loaders give them: lengths 1 to `length`."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    sequences = torch.randint(1, items + 1, (batch, length), generator=generator)
    sequences[torch.arange(length)[None, :] >= lengths[:, None]] = 0
    return sequences


CASES = {
    "many repeats and self-loops": _sequences(0, 300, 20, 6),
    "mostly distinct items": _sequences(1, 300, 50, 5000),
    "every sequence full": _sequences(2, 50, 8, 4).clamp(min=1),
    "one item each": _sequences(3, 20, 5, 9)[:, :1],
    # not what RecBole's loaders give: a 0 inside a sequence ends its edges (RecBole's loop breaks)
    "a zero inside": torch.tensor([[3, 3, 0, 5, 3, 0], [7, 0, 0, 0, 0, 0], [1, 2, 1, 2, 0, 4]]),
}


@pytest.mark.parametrize("sequences", CASES.values(), ids=CASES.keys())
def test_the_graphs_equal_recboles_bit_for_bit(sequences):
    expected = GCSAN._get_slice(_HOST, sequences)

    got = session_graph(sequences)

    for name, want, have in zip(("alias_inputs", "A", "items"), expected, got):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        assert torch.equal(have, want), name
        assert have.stride() == want.stride(), name  # the same layout for the matrix products that read A
    assert got[1].float().count_nonzero() > 0 or sequences.shape[1] == 1


def _bare(model_class):
    """An instance of a RecBole model class without its (data-needing) constructor."""
    model = object.__new__(model_class)
    torch.nn.Module.__init__(model)
    return model


@pytest.mark.parametrize("sequences", [CASES["many repeats and self-loops"], CASES["every sequence full"]],
                         ids=["padded", "full"])
def test_hrms_inverted_sequences_equal_recboles(sequences):
    lengths = (sequences != 0).sum(1)

    got = inverse_sequences(sequences, lengths)

    expected = HRM.inverse_seq_item(_HOST, sequences, lengths)
    assert got.dtype == expected.dtype and got.stride() == expected.stride() and torch.equal(got, expected)


def _kgnnls(n_iter: int, batch: int, device="cpu"):
    """A bare KGNNLS with what `label_smoothness_predict` reads: its interaction table (user * 100 +
    entity: 1.0 for a third of the pairs, 0.0 for a fifth), relation embeddings and sizes."""
    generator = torch.Generator().manual_seed(n_iter)
    model = _bare(KGNNLS)
    model.n_iter, model.neighbor_sample_size, model.embedding_size, model.batch_size = n_iter, 4, 8, batch
    model.relation_embedding, model.softmax = torch.nn.Embedding(6, 8), torch.nn.Softmax(dim=-1)
    draws = torch.rand(10, 30, generator=generator)
    model.offset, model.device = 100, torch.device(device)
    model.interaction_table = {user * 100 + entity: float(draws[user, entity] < 0.33)
                               for user in range(10) for entity in range(30) if not 0.33 <= draws[user, entity] < 0.8}
    user = torch.randint(0, 10, (batch,), generator=generator)
    entities = [torch.randint(0, 30, (batch, 4 ** hop), generator=generator) for hop in range(n_iter + 1)]
    relations = [torch.randint(0, 6, (batch, 4 ** (hop + 1)), generator=generator) for hop in range(n_iter)]
    return model, torch.randn(batch, 8, generator=generator), user, entities, relations


@pytest.mark.parametrize("n_iter", [1, 2])
def test_kgnnls_labels_equal_recboles_bit_for_bit(n_iter):
    model, user_embeddings, user, entities, relations = _kgnnls(n_iter, batch=64)
    table = dict(model.interaction_table)
    ours = LabelSmoothness(model)

    got = ours(user_embeddings, user, entities, relations)

    expected = KGNNLS.label_smoothness_predict(model, user_embeddings, user, entities, relations)
    assert got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected)
    labels = ours.label(user[:, None] * 100 + entities[1])
    assert {0.0, 0.5, 1.0} <= set(labels.unique().tolist())  # found, sampled and missing pairs all met
    assert len(model.interaction_table) > len(table)  # RecBole's lookups add the keys they miss: 0.5 each


def _ripplenet(seed: int):
    """A bare RippleNet with what its forward and full_sort_predict read: 10 users' ripple sets over 2
    hops (user 9's second hop a copy of its first, as RecBole's builder makes for an empty hop)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = _bare(RippleNet)
    model.USER_ID, model.ITEM_ID, model.device = "user_id", "item_id", torch.device("cpu")
    model.n_users, model.n_items, model.n_hop, model.n_memory, model.embedding_size = 10, 12, 2, 4, 8
    model.entity_embedding, model.relation_embedding = torch.nn.Embedding(30, 8), torch.nn.Embedding(5, 64)
    model.transform_matrix, model.softmax = torch.nn.Linear(8, 8, bias=False), torch.nn.Softmax(dim=1)
    model.ripple_set = {user: [tuple(torch.randint(0, 5 if k == 1 else 30, (4,), generator=generator) for k in range(3))
                               for _ in range(2)] for user in range(10)}
    model.ripple_set[9][1] = model.ripple_set[9][0]
    return model, {"user_id": torch.tensor([3, 9, 3, 0, 7]), "item_id": torch.tensor([1, 11, 4, 0, 2])}


def test_ripplenets_scores_and_gradients_equal_recboles_bit_for_bit():
    model, batch = _ripplenet(0)
    ours = RippleSets(model)
    outputs = {}
    for way, forward, full_sort in (("recbole", lambda b: RippleNet.forward(model, b), lambda b: RippleNet.full_sort_predict(model, b)),
                                    ("arrays", ours.forward, ours.full_sort_predict)):
        model.zero_grad()
        scores = forward(batch)
        (scores.sum() + sum(e.sum() for e in model.h_emb_list + model.r_emb_list + model.t_emb_list)).backward()
        outputs[way] = (scores, full_sort(batch), [p.grad.clone() for p in model.parameters()])

    (scores, full, grads), (our_scores, our_full, our_grads) = outputs["recbole"], outputs["arrays"]
    assert torch.equal(scores, our_scores) and full.shape == (5 * 12,) and torch.equal(full, our_full)
    assert len(grads) == 3 and all(torch.equal(a, b) for a, b in zip(grads, our_grads))


def test_ripplenets_sets_follow_the_ones_a_checkpoint_loads():
    model, batch = _ripplenet(1)
    ours = RippleSets(model)
    ours.forward(batch)

    model.ripple_set = _ripplenet(2)[0].ripple_set  # RecBole's load_other_parameter replaces the dict

    assert torch.equal(ours.forward(batch), RippleNet.forward(model, batch))


def test_ripplenets_sets_are_gathered_on_the_models_device_without_a_trip_to_the_host():
    """`meta` stands for a GPU: RecBole's forward copies the batch's users to the host (`.cpu().numpy()`),
    which a meta tensor refuses."""
    model, batch = _ripplenet(3)
    model.to("meta")
    model.device = torch.device("meta")
    model.ripple_set = {user: [[memory.to("meta") for memory in hop] for hop in hops]
                        for user, hops in model.ripple_set.items()}  # as a checkpoint's sets come back
    batch = {name: ids.to("meta") for name, ids in batch.items()}

    assert RippleSets(model).forward(batch).device.type == "meta"
    assert RippleSets(model).full_sort_predict(batch).shape == (5 * 12,)
    with pytest.raises(Exception):
        RippleNet.forward(model, batch)


def test_the_five_models_get_the_array_built_methods_and_other_models_do_not():
    sequences = CASES["many repeats and self-loops"]
    srgnn, gcsan, hrm = _bare(SRGNN), _bare(GCSAN), _bare(HRM)

    assert (without_host_loops(srgnn), without_host_loops(gcsan)) == (("_get_slice",), ("_get_slice",))
    assert without_host_loops(hrm) == ("inverse_seq_item",) and "inverse_seq_item" in vars(hrm)
    assert without_host_loops(_bare(SASRec)) == ()

    expected = SRGNN._get_slice(_HOST, sequences)  # SRGNN's also returns the mask of items
    got = srgnn._get_slice(sequences)
    assert len(got) == 4 and all(torch.equal(a, b) for a, b in zip(expected, got))
    assert all(torch.equal(a, b) for a, b in zip(GCSAN._get_slice(_HOST, sequences), gcsan._get_slice(sequences)))
    assert "_get_slice" not in srgnn.state_dict() and type(srgnn)._get_slice is SRGNN._get_slice
    kgnnls = _kgnnls(1, batch=4)[0]
    assert without_host_loops(kgnnls) == ("label_smoothness_predict",)
    assert isinstance(vars(kgnnls)["label_smoothness_predict"], LabelSmoothness)
    ripplenet = _ripplenet(0)[0]
    assert without_host_loops(ripplenet) == ("forward", "full_sort_predict")
    for method in ("forward", "full_sort_predict"):  # fast mode names and remembers a compiled method by its model
        assert vars(ripplenet)[method].__self__ is ripplenet and vars(ripplenet)[method].__name__ == method


def test_a_subclass_with_its_own_graphs_keeps_them():
    class MySRGNN(SRGNN):
        def _get_slice(self, item_seq):
            return "mine"

    model = _bare(MySRGNN)

    assert without_host_loops(model) == ()
    assert model._get_slice(None) == "mine"


@pytest.mark.parametrize("model, method", [("SRGNN", "_get_slice"), ("HRM", "inverse_seq_item"),
                                           ("KGNNLS", "label_smoothness_predict"), ("RippleNet", "forward"),
                                           ("FEARec", "calculate_loss")])
def test_a_run_never_calls_recboles_loop(model, method, workspace, monkeypatch):
    def recboles_loop(self, *args):
        raise AssertionError(f"RecBole's {method} was called")

    monkeypatch.setattr(get_model(model), method, recboles_loop)
    params = {**tiny_params(model, model_keys(model)), "epochs": 1}

    result = run_experiment(Experiment(model, "ml-100k", params), workspace, console=False)

    assert result.status == "ok", result.error
    assert re.search(rf"{model}\.{method}\b.* without RecBole's loop over the batch", (result.run_dir / "run.log").read_text())


def test_built_on_the_sequences_device_without_a_trip_to_the_host():
    """On a GPU the sequences stay there; here the `meta` device stands for it (RecBole's loops call
    `.cpu().numpy()`, which a meta tensor refuses)."""
    sequences = CASES["many repeats and self-loops"].to("meta")
    lengths = torch.full((sequences.size(0),), 3, device="meta")

    assert all(t.device.type == "meta" for t in session_graph(sequences))
    assert inverse_sequences(sequences, lengths).device.type == "meta"
    model, user_embeddings, user, entities, relations = _kgnnls(1, batch=8, device="meta")
    on_meta = [t.to("meta") for t in (user_embeddings, user, *entities, *relations)]
    model.relation_embedding.to("meta")
    assert LabelSmoothness(model)(on_meta[0], on_meta[1], on_meta[2:4], on_meta[4:]).device.type == "meta"
    with pytest.raises(Exception):  # the loop this replaces
        GCSAN._get_slice(types.SimpleNamespace(device=torch.device("meta")), sequences)


def _recboles_draws(targets, histories, same_item_index, training_histories):
    """The rows RecBole's `FEARec.calculate_loss` loop picks, transcribed from its source with its tensors."""
    import random

    chosen = []
    for i, item_id in enumerate(torch.tensor(targets)):
        remaining_indices = same_item_index[item_id.item()].copy()
        while len(remaining_indices) > 0:
            sample_index = random.choice(remaining_indices)
            remaining_indices = remaining_indices[remaining_indices != sample_index]
            if not torch.equal(torch.from_numpy(histories[i]), torch.from_numpy(training_histories[sample_index])) \
                    or len(remaining_indices) == 0:
                chosen.append(int(sample_index))
                break
    return chosen


def test_fearecs_same_target_rows_are_recboles_draws_in_its_order(monkeypatch):
    """Many rows share a target and a history, so RecBole's loop draws again; target 6's rows all have
    one history, so it runs out of others. The generator must be left where RecBole's leaves it."""
    import random

    import numpy as np

    generator = np.random.default_rng(0)
    training_targets = np.concatenate([generator.integers(1, 6, 400), [6, 6, 6]])
    training_histories = np.concatenate([generator.integers(0, 3, (400, 2)), [[1, 1]] * 3])  # 9 histories
    same_item_index = {item: np.where(training_targets == item)[0] for item in np.unique(training_targets)}
    picked = np.concatenate([generator.integers(0, 400, 300), [401, 400]])
    targets, histories = training_targets[picked].tolist(), training_histories[picked]
    draws = []
    monkeypatch.setattr(random, "choice", lambda seq, choice=random.choice: draws.append(1) or choice(seq))

    random.seed(7)
    expected = _recboles_draws(targets, histories, same_item_index, training_histories)
    after_recbole, recboles_draws = random.getstate(), len(draws)
    random.seed(7)
    got = same_target_rows(targets, histories, same_item_index, training_histories)

    assert got.tolist() == expected and random.getstate() == after_recbole
    assert len(draws) == 2 * recboles_draws > 2 * (len(targets) + 20)  # drawn again for some
    assert set(expected[-2:]) <= {400, 401, 402}  # out of other histories: RecBole keeps the last drawn


@pytest.mark.parametrize("contrast", [None, "us", "us_x"])  # None: RecBole's default, no contrastive loss
def test_fearecs_loss_and_gradients_equal_recboles_bit_for_bit(contrast, workspace):
    import random

    from recbole.model.sequential_recommender import FEARec

    from .conftest import same, trainer_and_data

    params = {**tiny_params("FEARec", model_keys("FEARec")), "MAX_ITEM_LIST_LENGTH": 3, "train_batch_size": 512,
              "contrast": contrast, "tau": 1.0, "sim": "dot", "fredom": True, "fredom_type": contrast}
    trainer, train, _, _ = trainer_and_data(workspace, "FEARec", params)
    model = trainer.model
    ours = SameTargetSequences(model)
    for batch in list(train)[:2]:
        batch = batch.to(trainer.device)  # as the epoch moves it
        outputs = {}
        for way, loss_of in (("recbole", lambda b: FEARec.calculate_loss(model, b)), ("ours", ours.calculate_loss)):
            random.seed(3)
            torch.manual_seed(3)  # its forward passes' dropout
            model.zero_grad()
            loss = loss_of(batch)
            loss.backward()
            outputs[way] = (loss, [p.grad.clone() for p in model.parameters()], random.getstate(),
                            batch["sem_aug"].clone())
        (loss, grads, state, sem_aug), (our_loss, our_grads, our_state, our_sem_aug) = outputs["recbole"], outputs["ours"]
        assert same(loss, our_loss) and all(same(a, b) for a, b in zip(grads, our_grads))
        assert state == our_state and torch.equal(sem_aug, our_sem_aug)
