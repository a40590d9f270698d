"""Fast mode carried out: the model's methods wrapped, fp16's gradient scaler, the trainer set up.

What to do is decided in recrunner.training.fast.plan (`FastPlan`); this module does it. `go_fast(trainer)`
is the trainer's one call: it wraps the model (instance attributes, so state_dict keys and
checkpoints are unchanged), builds the optimizer again with a fused step where the plan says so
(fused.py), turns RecBole's own `enable_amp`/`enable_scaler` off (fast mode's autocast covers
evaluation too, and its scaler persists across epochs and in last.pth), and logs the plan in one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import torch

from . import compiler
from .attention import fused_attention
from .dropout import numpy_masks
from .failures import Failure, FailureBook, model_key
from .fused import fused_optimizer
from .last_layer import last_layer_only
from .plan import METHODS, FastPlan, plan_for
from .source import counters

logger = logging.getLogger("recrunner")


def go_fast(trainer) -> FastPlan | None:
    """Apply the run's fast plan to `trainer` (before the trainer builds its optimizer step)."""
    plan = plan_for(trainer.config, trainer.config["model"], single_pass=trainer.single_pass)
    if plan is None:
        return None
    trainer.logger.info(plan.describe())
    if plan.fused_optimizer:  # before OptimizerStep wraps it and before a resume loads its state (fused.py)
        trainer.optimizer = fused_optimizer(trainer.optimizer)
    if plan.model_unchanged:  # exact, or only the negatives drawn otherwise (the data layer drew them)
        return plan
    accelerate(trainer.model, plan)
    trainer.enable_amp = trainer.enable_scaler = False
    if plan.scaler:  # the loss is scaled here; the optimizer step unscales (recrunner.training.loop.optimizer)
        trainer.grad_scaler = torch.amp.GradScaler(trainer.device.type)
        trainer.model.calculate_loss = scaled_loss(trainer.model.calculate_loss, trainer.grad_scaler)
    return plan


class FastMethod:
    """One model method compiled when the plan says so; the loss in the plan's precision, scores in fp32.

    A compiler failure (an exception from torch._dynamo or torch._inductor) switches the method
    to eager in the same precision, once, with a log line (where inductor failed, after a compile
    without its pattern rewrites failed too); any other exception is the model's own and passes
    through (RecBole relies on NotImplementedError from full_sort_predict).
    `counted`: the int attributes the model's loss changes (`source.counters`), which are compiled as
    symbols, not as constants. `book`: where the outcome of a failure is remembered for the next run
    of the same model, and read at once (failures.py); None: nothing remembered.
    """

    def __init__(self, method, plan: FastPlan, *, scoring: bool, counted=(), book: FailureBook | None = None):
        self.method, self.plan, self.scoring, self.counted = method, plan, scoring, bool(counted)
        self.name = getattr(method, "__name__", "method")
        compiled = plan.compile and (plan.compile_scoring or not scoring)
        # a loss is copied before the next call (loop/losses.py); scores may not be. A graph is
        # recorded per value of a symbol: one per step for a counted loss
        self.graphs = plan.cuda_graphs and not scoring and not counted
        mode = "reduce-overhead" if self.graphs else None
        static = plan.static_shapes and not scoring  # the loss's one shape as it is (data.py's static_choice)
        self.compiled = torch.compile(method, dynamic=None if static else True, mode=mode) if compiled else None
        self.rewrites = True  # inductor's pattern rewrites (attention fused, ...): off where they failed
        self.book, self.key = book, None
        if self.compiled is not None and book is not None and hasattr(method, "__self__"):
            self.key = model_key(method.__self__, self.name, f"{plan.settings()}, {mode}", tuple(counted))
            self._remembered(book.get(self.key))

    def _remembered(self, failure: Failure | None) -> None:
        """Start where an earlier run of this model ended after the compiler failed (failures.py)."""
        if failure is None:
            return
        if failure.outcome == "eager":
            self.compiled = None
            logger.warning(f"fast mode: {self.name} runs eagerly, the compiler failed on this model in an earlier run: "
                           f"{failure.reason} (remembered in {self.book.path}; delete it to try again)")
        else:
            self.rewrites = False
            logger.info(f"fast mode: {self.name} compiled without inductor's pattern rewrites, which failed on this "
                        f"model in an earlier run: {failure.reason} (remembered in {self.book.path})")

    def _remember(self, outcome: str, exc: BaseException) -> None:
        if self.key is not None:
            where = f"{type(self.method.__self__).__name__}.{self.name}"
            self.book.add(self.key, Failure(outcome, compiler.compiler_reason(exc), where))

    def __call__(self, *args, **kwargs):
        with self._precision(args):
            if self.compiled is None:
                return self.method(*args, **kwargs)
            if self.graphs:  # a new training step: the last step's graph outputs may be overwritten
                torch.compiler.cudagraph_mark_step_begin()
            try:
                with self._settings():
                    return self.compiled(*args, **kwargs)
            except Exception as exc:
                if not compiler.is_compiler_error(exc):
                    raise
                return self._after_failure(exc, args, kwargs)

    def _after_failure(self, exc, args, kwargs):
        """The compiler failed: where inductor did, once more without its pattern rewrites (SASRec with
        one head: its attention rewrite fails on the scores' shapes), else, or if that fails too, eagerly."""
        logger.info(f"the compiler's whole error:\n{exc}", extra={"file_only": True})  # run.log
        if self.rewrites and compiler.is_inductor_error(exc):
            self.rewrites = False
            try:
                with self._settings():
                    result = self.compiled(*args, **kwargs)
                logger.info(f"fast mode: {self.name} compiled without inductor's pattern rewrites; with them "
                            f"the compiler failed: {compiler.compiler_reason(exc)}")
                self._remember("no rewrites", exc)
                return result
            except Exception as again:
                if not compiler.is_compiler_error(again):
                    raise
                exc = again
                logger.info(f"the compiler's whole error, without pattern rewrites:\n{exc}", extra={"file_only": True})
        logger.warning(f"fast mode: {self.name} runs eagerly, the compiler failed: {compiler.compiler_reason(exc)}")
        if not compiler.is_inductor_error(exc):  # dynamo's trace of the model's Python: the model's, not the machine's
            self._remember("eager", exc)
        self.compiled = None
        return self.method(*args, **kwargs)

    def _precision(self, args):
        if self.plan.dtype is None or self.scoring:  # scores in fp32: bf16/fp16 scores tie (docs/fast.md)
            return contextlib.nullcontext()
        # no cast kept between calls: a step recorded as CUDA graphs (loop/graphs.py) would replay the casts
        # of its warm-up's weights, freed when the step ends (an H200 read freed memory, 2026-11-30)
        return torch.autocast(device_type=_device_of(args), dtype=self.plan.dtype, cache_enabled=False)

    def _settings(self):
        """The compiler's settings for this method's calls only (each is process-wide in torch):
        a counted model's int attributes traced as symbols (`allow_unspec_int_on_nn_module`: for
        every model it would make hidden sizes symbols too; MultiVAE's loss then compiled once in
        10 steps, in 5.0 s, against 8 graphs in 51 s and an eager loss after torch's recompile
        limit, on this project's CPU), and inductor's pattern rewrites off after they failed."""
        import torch._dynamo.config as dynamo
        import torch._inductor.config as inductor

        settings = contextlib.ExitStack()
        if self.counted:
            settings.enter_context(dynamo.patch(allow_unspec_int_on_nn_module=True))
        if not self.rewrites:
            settings.enter_context(inductor.patch(pattern_matcher=False))
        return settings


def accelerate(model: torch.nn.Module, plan: FastPlan) -> list[str]:
    """Wrap the model's loss and scoring methods (instance attributes; see the module docstring);
    the names of the methods wrapped."""
    if plan.model_unchanged:
        return []
    counted = counters(model) if plan.compile else []
    eager_loss = bool(counted) and not compiler.counted_loss_compiles(str(torch.__version__))
    if plan.compile:
        compiler.set_up()
    book = FailureBook() if plan.compile else None
    wrapped = []
    for name in METHODS:
        method = getattr(model, name, None)
        if method is None or isinstance(method, FastMethod):
            continue
        eager = eager_loss and name == "calculate_loss"
        setattr(model, name, FastMethod(method, dataclasses.replace(plan, compile=False, cuda_graphs=False) if eager else plan,
                                        scoring=name != "calculate_loss", counted=counted, book=book))
        wrapped.append(name)
    if eager_loss and wrapped:
        logger.warning(f"fast mode: {type(model).__name__}'s loss changes {', '.join('self.' + n for n in counted)}, and torch "
                       f"{torch.__version__} compiles such a loss wrongly (torch 2.11 returned a loss of 0), so it runs "
                       "eagerly; torch >= 2.13 compiles it")
    elif counted and wrapped:
        logger.info(f"fast mode: {type(model).__name__}'s loss changes {', '.join('self.' + n for n in counted)}, "
                    "compiled as a symbol (one graph, not one per value)"
                    + ("; its loss is not replayed as CUDA graphs (one per value)" if plan.cuda_graphs else ""))
    if plan.dropout == "numpy":
        numpy_masks(model)
    if plan.attention:
        fused_attention(model)
    if plan.last_layer:
        last_layer_only(model)
    return wrapped


def scaled_loss(loss_method, scaler):
    """`loss_method` whose losses backpropagate scaled by `scaler` while their values stay unscaled: the
    first of the optimizer step's parts (recrunner.training.loop.optimizer)."""

    def scaled(*args, **kwargs):
        losses = loss_method(*args, **kwargs)
        if isinstance(losses, tuple):
            return tuple(_scaled(loss, scaler) for loss in losses)
        return _scaled(losses, scaler)

    scaled.__name__ = getattr(loss_method, "__name__", "calculate_loss")
    return scaled


def _scaled(loss, scaler):
    big = scaler.scale(loss)
    return loss.detach() + (big - big.detach())  # the value of loss, the gradient of scale * loss


def _device_of(args) -> str:
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg.device.type
        interaction = getattr(arg, "interaction", None)
        if isinstance(interaction, dict):
            for value in interaction.values():
                if isinstance(value, torch.Tensor):
                    return value.device.type
    return "cpu"
