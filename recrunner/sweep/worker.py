"""One cell, run where an executor puts it: in this process, a fresh local process, or a Ray task.

`run_task` never raises for a failing cell: run_experiment records training failures itself, and
anything raised before that (a configuration RecBole rejects, a missing dataset) comes back as a
failed result with its one-line reason, so the sweep goes on.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import RunInterrupted, one_line
from ..core.interrupts import raise_interrupt
from ..run.record import Status
from ..run.experiment import Experiment, Workspace, run_experiment
from ..run.result import RunResult


@dataclass(frozen=True)
class Task:
    cell: str                 # the cell id: <dataset>/<model>/<run_id>
    experiment: Experiment
    workspace: Workspace
    threads: int | None = None
    restart: bool = False
    console: bool = False
    trial: Any = None         # a search trial (training/callbacks/pruning.py: TrialRef): its validations go to the study
    callbacks: tuple = ()     # callbacks of the library's caller (picklable: they travel to the cell's processes)


def run_task(task: Task) -> RunResult:
    """Run the cell; its result carries the cell's wall time (`seconds`)."""
    started = time.perf_counter()
    from . import distributed

    world = distributed.torchrun_world()
    if world is None and distributed.requested_processes(task) > 1:  # --nproc: N processes train the cell
        try:
            return distributed.launch(task, distributed.requested_processes(task)).timed(time.perf_counter() - started)
        except RunInterrupted as exc:
            return RunResult.failed(str(exc), Status.INTERRUPTED).timed(time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - a cell's failure must not end the sweep
            return RunResult.failed(one_line(exc)).timed(time.perf_counter() - started)
    if world is not None:  # under torchrun: the other processes train this cell with this one
        distributed.hand_over(world, task)
    if task.threads:
        import torch

        torch.set_num_threads(task.threads if world is None else max(1, task.threads // world.size))
    try:
        callbacks = tuple(task.callbacks)
        if task.trial is not None:
            from ..training.callbacks.pruning import OptunaPruning

            callbacks += (OptunaPruning(task.trial),)
        result = run_experiment(task.experiment, task.workspace, restart=task.restart, console=task.console,
                                callbacks=callbacks)
    except RunInterrupted as exc:
        result = RunResult.failed(str(exc), Status.INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - a cell's failure must not end the sweep
        result = RunResult.failed(one_line(exc))
    return result.timed(time.perf_counter() - started)


def on_gpu(task: Task, gpu_ids) -> Task:
    """The task pinned to these GPUs. RecBole sets CUDA_VISIBLE_DEVICES from `gpu_id` itself,
    so the choice travels as the run's (identity-free) runtime setting."""
    if not gpu_ids:
        return task
    runtime = {**task.experiment.runtime, "gpu_id": ",".join(str(g) for g in gpu_ids)}
    return replace(task, experiment=replace(task.experiment, runtime=runtime))


def child_main(task: Task, connection) -> None:
    """Entry point of a fresh local worker process: one cell, then exit."""
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the coordinator, which stops the workers
    _stop_with_sweep(connection)
    result = run_task(task)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cell has ended: nothing left to interrupt
    try:
        connection.send(result)
        connection.close()
    except OSError:  # the sweep process is gone; the run's own files hold the outcome
        pass


def _stop_with_sweep(connection) -> None:
    """SIGTERM this process (its run ends as interrupted, resumable from last.pth) when the sweep
    process is gone, however it went (SIGKILL, the OOM killer): a thread waits on the worker's
    end of their pipe, which becomes readable at end-of-file when the sweep's end closes; the sweep
    never sends on it. Without it a killed sweep's cell kept training while the next sweep
    reclaimed it: the fork server, the worker's parent, lives as long as any worker does."""
    import threading

    def watch():
        try:
            connection.poll(None)
        except (OSError, EOFError, ValueError):  # closed here: the cell is done
            return
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="recrunner-sweep-watch", daemon=True).start()


def ray_entry(task: Task) -> RunResult:
    """Entry point of a Ray task (a fresh worker process per task: max_calls=1)."""
    import ray

    signal.signal(signal.SIGTERM, raise_interrupt)
    return run_task(on_gpu(task, [int(g) for g in ray.get_gpu_ids()]))


def default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))

