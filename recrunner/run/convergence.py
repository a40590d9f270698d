"""Whether a run may be under-trained: the flag results.md, the report and the console show.

A model compared before it converged loses for a reason that has nothing to do with the model
(Petrov & Macdonald 2022: BERT4Rec needs far more training than its defaults). Two signs, both
read from the run's record:

- its best epoch is the last epoch it validated: the score was still improving when it stopped;
- it reached `epochs` without early stopping: the cap, not the data, ended training.

Models fitted in one pass by design (Pop, ItemKNN, EASE...: RecBole's TraditionalTrainer) have
nothing to converge and are never flagged.
"""

from __future__ import annotations

UNDER_TRAINED = "may be under-trained"  # how the flag begins
UNDER_TRAINED_MARK = "‡"  # beside a table cell whose runs may be under-trained (results.md, report.md)


def last_validated_epoch(last_epoch: int, eval_step: int) -> int | None:
    """The newest epoch <= `last_epoch` that validates every `eval_step` epochs (pure)."""
    if eval_step <= 0 or last_epoch < 0:
        return None
    validated = (last_epoch + 1) // eval_step * eval_step - 1
    return validated if validated >= 0 else None


def under_trained(*, best_epoch: int | None, epochs_trained: int | None, max_epochs: int | None,
                  stopped_early: bool, eval_step: int = 1, single_pass: bool = False,
                  best_step: int | None = None, validated_step: int | None = None) -> str | None:
    """"may be under-trained: ..." with the reasons, or None when neither sign shows (pure).

    A run that validates every `eval_every_steps` passes `best_step` and `validated_step` (the
    step of its newest validation): the first sign is then its best validation being its last."""
    if single_pass or not epochs_trained:
        return None
    reasons = []
    last = last_validated_epoch(epochs_trained - 1, eval_step)
    if validated_step is not None:
        if best_step is not None and best_step >= validated_step:
            reasons.append(f"its best validation (step {best_step}) is the last it ran")
    elif best_epoch is not None and last is not None and best_epoch >= last:
        reasons.append(f"its best epoch ({best_epoch}) is the last it validated")
    if not stopped_early and max_epochs is not None and epochs_trained >= max_epochs:
        reasons.append(f"it reached epochs={max_epochs} without early stopping")
    return f"{UNDER_TRAINED}: " + " and ".join(reasons) if reasons else None
