"""The run's side of data-parallel training (docs/distributed.md): what rank 0 tells the others,
and what every process sets up for itself. The trainer's side is recrunner.training.distributed.world;
starting the processes is recrunner.sweep.distributed's."""

from __future__ import annotations

from ..config.params import setting
from ..core.errors import ConfigError
from ..core.docs import page


def tell(world, decision) -> None:
    """Rank 0 tells the other processes whether the run trains, and from which checkpoint."""
    if world is not None:
        world.share(decision)


def reseed_process(config) -> None:
    """After the model is built (the same on every process, from `seed`): each process its own random
    stream, `seed + rank`, for dropout and negative sampling (as RecBole seeds its processes)."""
    from ..training.distributed.world import current

    world = current()
    if world is not None:
        from recbole.utils import init_seed

        init_seed(config["seed"] + world.rank, config["reproducibility"])


def follower_config(config) -> None:
    """A process other than rank 0 shows nothing and sends nothing to external trackers."""
    config["progress_bar"], config["trackers"], config["log_wandb"], config["show_progress"] = False, [], False, False


def data_parallel_refusal(prepared) -> str | None:
    """Why this run cannot be trained in several processes (pure over its trainer class), or None."""
    from ..training.loop.steps import own_epoch_loop

    config, trainer_class = prepared.config, prepared.trainer_class
    model = config["model"]
    if getattr(trainer_class, "single_pass", False) or not getattr(trainer_class, "reports_loss", True):
        return f"{model} is fitted in one pass or by a booster, not by gradient steps"
    own = own_epoch_loop(trainer_class)
    if own is not None:
        return f"{model} trains its epochs with {own}, whose steps are not data parallel"
    if prepared.stages:
        return f"{model} has pre-training stages ({', '.join(prepared.stages)})"
    if config["train_neg_sample_args"] and config["train_neg_sample_args"].get("dynamic", False):
        return f"{model} samples negatives with the model itself (dynamic sampling)"
    if setting(config, "fast") and setting(config, "fast_precision") == "fp16":
        return "fast_precision fp16 scales its loss per process"
    if config["worker"]:
        return "worker > 0 (the training processes build their own batches: set worker: 0)"
    return None


def check_data_parallel(prepared) -> int:
    """The run's process count; a run that cannot use it is a ConfigError naming why."""
    nproc = int(setting(prepared.config, "nproc"))
    if nproc > 1:
        reason = data_parallel_refusal(prepared)
        if reason:
            raise ConfigError(f"{prepared.config['model']} cannot train in {nproc} processes: {reason}; "
                              f"run it without --nproc ({page('distributed')} lists what can)")
    return nproc


def check_processes(prepared, world) -> None:
    """The run asks for as many processes as it is running in (`--nproc`, or torchrun's WORLD_SIZE)."""
    nproc = check_data_parallel(prepared)
    size = world.size if world is not None else 1
    if nproc != size:
        raise ConfigError(f"{prepared.config['model']} on {prepared.config['dataset']} sets nproc {nproc} but runs in "
                          f"{size} process(es); start it with recrunner --nproc {nproc} (or torchrun --nproc-per-node)")
