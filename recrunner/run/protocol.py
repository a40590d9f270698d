"""The evaluation protocol of a run: its card, its leakage audit, and the warnings they raise.

Offline results mislead in known ways: splits that ignore the global timeline train on the
future (Ji et al. 2023; Hidasi & Czapp 2023), sampled metrics can reorder models (Krichene &
Rendle 2020). Every run records a card in its metrics.json (`protocol`), computed from RecBole's
resolved `eval_args` and the three datasets its split produced:

    split      ratio [0.8, 0.1, 0.1] | leave-one-out (valid_and_test) | time-based [...]
    order      time | random          grouping   per user | global
    ranking    {"valid": "full" | "sampled: 100 uniform negatives", "test": ...}
    filters    the interaction filters that were set (k-core intervals, val_interval, ...)
    counts     users, items and rows in train / valid / test; for sequential models a row is a
               prediction target (RecBole augments before splitting: a first interaction is history)
    items      the items a full ranking scores for each user
    leakage    the audit below, or why it does not apply

Runs whose cards differ in anything but counts and leakage are never pooled in one table cell
(`protocol_key`). All functions are pure except `card`, which reads the datasets.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from ..config.params import eval_modes
from ..core.docs import page

# a share above this is reported as leakage (ties at the boundary are not leakage)
LEAK_WARNING = 0.01
FILTER_KEYS = ("user_inter_num_interval", "item_inter_num_interval", "val_interval", "rm_dup_inter")
GLOBAL_SPLIT = "--config-file protocols/global-temporal.yaml"  # the packaged layer (recrunner/configs/protocols)


def card(config, train, valid, test) -> dict:
    """The protocol card of a run: `config` is RecBole's Config, the others its split datasets."""
    eval_args = config["eval_args"]
    found = {**describe_split(eval_args), "ranking": describe_ranking(eval_args),
             "filters": {k: config[k] for k in FILTER_KEYS if config[k] not in (None, False, {}, [])},
             "counts": {name: counts(ds) for name, ds in (("train", train), ("valid", valid), ("test", test))
                        if ds is not None},
             "items": int(train.item_num - 1),
             "rows": "prediction targets" if getattr(train, "item_list_length_field", None) else "interactions"}
    found["leakage"] = audit(train, valid, test)
    return found


def describe_split(eval_args: dict) -> dict:
    """split, order and grouping of RecBole's resolved `eval_args`, in words (pure)."""
    (mode, value), = dict(eval_args["split"]).items()
    group_by = eval_args.get("group_by")
    per_user = group_by is not None and str(group_by).lower() != "none"
    if mode == "LS":
        split, grouping = f"leave-one-out ({value})", "per user"
    elif mode == "TS":
        split, grouping = f"time-based {list(value)}: test after one global time boundary", "global test boundary"
    else:
        split, grouping = f"ratio {list(value)}", "per user" if per_user else "global"
    return {"split": split, "order": "time" if eval_args.get("order") == "TO" else "random", "grouping": grouping}


def describe_ranking(eval_args) -> dict:
    """{"valid": ..., "test": ...}: "full", "sampled: 100 uniform negatives", "labeled" (pure)."""
    return {phase: _ranking(mode) for phase, mode in eval_modes(eval_args).items()}


def _ranking(mode: str) -> str:
    for prefix, kind in (("uni", "uniform"), ("pop", "popularity-sampled")):
        if mode.startswith(prefix) and mode[len(prefix):].isdigit():
            return f"sampled: {int(mode[len(prefix):])} {kind} negatives"
    return mode


def sampled_negatives(ranking: str) -> int | None:
    """100 for "sampled: 100 uniform negatives", None for a full ranking (pure)."""
    return int(ranking.split()[1]) if ranking.startswith("sampled:") else None


def counts(dataset) -> dict:
    """Users, items and rows of one split dataset."""
    inter = dataset.inter_feat
    found = {"rows": int(len(inter))}
    for name, field in (("users", dataset.uid_field), ("items", dataset.iid_field)):
        if field is not None and field in inter:
            found[name] = int(len(np.unique(inter[field].numpy())))
    return found


def audit(train, valid, test) -> dict:
    """The leakage audit of a split (see `leakage`), or why it does not apply."""
    field = train.time_field
    if field is None or field not in train.inter_feat or test is None or field not in test.inter_feat:
        return {"applies": False, "reason": "no time column was loaded (load_col)"}
    parts = [ds for ds in (train, valid, test) if ds is not None]
    uids = np.concatenate([ds.inter_feat[train.uid_field].numpy() for ds in parts]) if train.uid_field else None
    times = np.concatenate([ds.inter_feat[field].numpy() for ds in parts])
    if uids is not None and positions_not_times(uids, times):
        return {"applies": False, "reason": f"{field} holds each user's positions 0, 1, 2..., not times"}
    valid_times = valid.inter_feat[field].numpy() if valid is not None else None
    return {"applies": True, **leakage(train.inter_feat[field].numpy(), valid_times, test.inter_feat[field].numpy())}


def leakage(train_times, valid_times, test_times) -> dict:
    """Shares of a split that cross the global timeline (pure):

    test_before_train_end    test interactions earlier than the latest training interaction
    valid_before_train_end   the same for validation
    train_after_test_start   training interactions later than the earliest test interaction
    """
    train_times = np.asarray(train_times, dtype=np.float64)
    test_times = np.asarray(test_times, dtype=np.float64)
    latest_train, earliest_test = float(train_times.max()), float(test_times.min())
    found = {"test_before_train_end": _share(test_times < latest_train),
             "valid_before_train_end": None,
             "train_after_test_start": _share(train_times > earliest_test)}
    if valid_times is not None and len(valid_times):
        found["valid_before_train_end"] = _share(np.asarray(valid_times, dtype=np.float64) < latest_train)
    return found


def _share(mask) -> float:
    return round(float(np.mean(mask)), 6) if len(mask) else 0.0


def positions_not_times(uids, times) -> bool:
    """True when the values are positions in each user's history, not times (pure): whole numbers
    >= 0, distinct within a user, and none as large as twice the longest history (a position is
    below its history's length; filters that drop interactions leave gaps, never larger values).
    Unix times, dates and RecBole's normalised floats all fail it. As in the shared ml-1m, Amazon
    and Yelp files, whose positions an audit cannot use."""
    uids, times = np.asarray(uids), np.asarray(times, dtype=np.float64)
    if not len(times) or times.min() < 0 or not np.all(times == np.round(times)):
        return False
    _, per_user = np.unique(uids, return_counts=True)
    if per_user.max() <= 2 or times.max() >= 2 * per_user.max():
        return False
    order = np.lexsort((times, uids))
    uids, times = uids[order], times[order]
    same_user = uids[1:] == uids[:-1]
    return bool(not np.any(same_user & (times[1:] == times[:-1])))


def warnings(card: dict) -> list[str]:
    """What a reader of this run's numbers must know: leakage, sampled metrics (pure)."""
    found = []
    leak = card.get("leakage") or {}
    shares = {name: leak.get(name) or 0.0 for name in
              ("test_before_train_end", "valid_before_train_end", "train_after_test_start")}
    if leak.get("applies") and max(shares.values()) > LEAK_WARNING:
        found.append(f"the split leaks the future ({card.get('split')}, {card.get('grouping')}, {card.get('order')} "
                     f"order): {shares['test_before_train_end']:.1%} of test and "
                     f"{shares['valid_before_train_end']:.1%} of validation interactions precede the latest training "
                     f"one, {shares['train_after_test_start']:.1%} of training interactions follow the earliest test "
                     f"one; {GLOBAL_SPLIT} splits on one global timeline ({page('protocols')})")
    for phase, ranking in (card.get("ranking") or {}).items():
        negatives = sampled_negatives(ranking)
        if negatives is None:
            continue
        items = card.get("items")
        cost = (f"; a full ranking scores all {items} items per user instead of {negatives + 1} "
                f"({items / (negatives + 1):.1f}x the scoring)") if items else ""
        found.append(f"{phase} metrics are sampled ({ranking.removeprefix('sampled: ')}) and sampled metrics can reorder models "
                     f"(Krichene & Rendle 2020){cost}")
    return found


def protocol_key(card: dict | None) -> str | None:
    """What makes two runs' numbers comparable: the card without counts and audit (pure)."""
    if not card:
        return None
    return json.dumps({k: card.get(k) for k in ("split", "order", "grouping", "ranking", "filters")}, sort_keys=True,
                      default=str)


CARD_FIELDS = ("split", "order", "grouping", "ranking", "filters")


def separate(rows: list[dict]) -> dict:
    """Never pool protocols: give each (dataset, protocol) its own table column; {label: card}.

    A dataset whose runs used one protocol keeps its name; one evaluated under several gets a
    label per protocol naming what differs (`ml-100k [order time]`, `ml-100k [order random]`).
    Rows are relabelled in place ("dataset"); finished rows without a card (records older than the
    card) form a protocol of their own; a cell that failed or has not finished (no card, no metrics)
    takes its dataset's column where it has one.
    """
    cards: dict = defaultdict(dict)
    finished = [row.get("protocol") or row.get("status", "ok") == "ok" for row in rows]
    for row in [row for row, done in zip(rows, finished) if done]:
        cards[row["dataset"]].setdefault(protocol_key(row.get("protocol")), row.get("protocol"))
    for row in [row for row, done in zip(rows, finished) if not done]:  # its dataset's one column, else its own
        if len(cards[row["dataset"]]) != 1:
            cards[row["dataset"]].setdefault(protocol_key(row.get("protocol")), row.get("protocol"))
    labels, found = {}, {}
    for dataset, by_key in cards.items():
        recorded = [card for card in by_key.values() if card]
        differing = [f for f in CARD_FIELDS if len({json.dumps(c.get(f), sort_keys=True, default=str)
                                                    for c in recorded}) > 1] if len(recorded) > 1 else CARD_FIELDS
        for key, card in by_key.items():
            label = dataset if len(by_key) == 1 else f"{dataset} [{_difference(card, differing)}]"
            labels[(dataset, key)] = label
            if card:
                found[label] = card
    for row in rows:
        key = (row["dataset"], protocol_key(row.get("protocol")))
        row["dataset"] = labels[key] if key in labels else labels[(row["dataset"], next(iter(cards[row["dataset"]])))]
    return found


def _difference(card: dict | None, fields) -> str:
    if not card:
        return "protocol not recorded"
    parts = []
    for name in fields:
        value = card.get(name)
        if name == "ranking":
            value = f"valid {value.get('valid')}, test {value.get('test')}" if value else None
        elif name == "filters":
            value = ", ".join(f"{k} {v}" for k, v in (value or {}).items()) or "none"
        parts.append(f"{name} {value}")
    return "; ".join(parts)


def summary(card: dict) -> str:
    """The card in one line: `leave-one-out (valid_and_test), time order, per user; full ranking`."""
    ranking = card.get("ranking") or {}
    words = {phase: "full ranking" if value == "full" else f"{value} ranking" if value == "labeled"
             else f"sampled ranking ({str(value).removeprefix('sampled: ')})" for phase, value in ranking.items()}
    ranked = words.get("test") if words.get("test") == words.get("valid") else \
        f"valid {words.get('valid')}, test {words.get('test')}"
    return f"{card.get('split')}, {card.get('order')} order, {card.get('grouping')}; {ranked}"


def card_lines(card: dict) -> list[str]:
    """The card as Markdown bullet lines (README, report)."""
    ranking = card.get("ranking") or {}
    lines = [f"- split: {card.get('split')}, order: {card.get('order')}, grouping: {card.get('grouping')}",
             f"- ranking: valid {ranking.get('valid')}, test {ranking.get('test')}"
             + (f" (a full ranking scores {card['items']} items)" if card.get("items") else ""),
             "- filters: " + (", ".join(f"{k} {v}" for k, v in (card.get("filters") or {}).items()) or "none")]
    for name, found in (card.get("counts") or {}).items():
        lines.append(f"- {name}: {found.get('users', '–')} users, {found.get('items', '–')} items, "
                     f"{found.get('rows')} {card.get('rows', 'rows')}")
    leak = card.get("leakage") or {}
    if leak.get("applies"):
        valid = leak.get("valid_before_train_end")
        lines.append(f"- leakage audit: {leak['test_before_train_end']:.1%} of test"
                     + (f" and {valid:.1%} of validation" if valid is not None else "")
                     + " interactions before the latest training interaction; "
                     f"{leak['train_after_test_start']:.1%} of training interactions after the earliest test one")
    elif leak:
        lines.append(f"- leakage audit: not applicable ({leak.get('reason')})")
    return lines
