"""Starting a data-parallel run's processes (docs/distributed.md).

`--nproc N` (the run's `nproc` setting): the cell's task starts N processes on this machine (torch's
`start_processes`), forked from the server that has imported torch and RecBole (sweep/forkserver.py),
so they start in a fraction of a second and share those pages. They meet through a file in a
private temporary folder, not a server, so two runs at once never collide and nothing listens on
the network; gloo's connections use the loopback interface. gloo on CPU, NCCL on CUDA with each
process on its own GPU. A process that fails ends the others (the launcher watches them); the
run's record then names the first failure: the process, and its reason or the signal that killed
it. A killed launcher takes its processes with it.

Under `torchrun` (several machines), every process runs the recrunner command itself: rank 0 runs
the sweep and hands each cell it trains to the others (`follow_sweep`), which train it with it.
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
from pathlib import Path

from . import forkserver
from ..core.errors import RunInterrupted, one_line
from ..core.interrupts import raise_interrupt
from ..run.record import RunRecord, Status
from ..run.result import RunResult


def requested_processes(task) -> int:
    """The processes a cell asks for (`nproc` in its parameters or runtime settings)."""
    value = {**task.experiment.params, **task.experiment.runtime}.get("nproc", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def launch(task, nproc: int) -> RunResult:
    """Train the cell in `nproc` processes on this machine; its result, or its first failure.

    The processes meet through a file in a private temporary folder (no rendezvous server), and
    gloo's connections between them use the loopback interface only."""
    import torch.multiprocessing as mp

    from ..run.distributed import check_data_parallel
    from ..run.experiment import prepare

    prepared = prepare(task.experiment, task.workspace)
    check_data_parallel(prepared)
    server = forkserver.context()  # the processes fork from the server that has imported torch and RecBole
    launcher_alive, alive = server.Pipe(duplex=False)  # `alive` closes when this process ends, however it ends
    with tempfile.TemporaryDirectory(prefix="recrunner-ranks-") as folder:
        context = mp.start_processes(rank_main, args=(task, folder, nproc, launcher_alive), nprocs=nproc,
                                     join=False, start_method="forkserver")
        launcher_alive.close()
        try:
            _join(context)
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
            return _first_failure(prepared.paths.metrics, exc, context, Path(folder))
        finally:
            alive.close()
    record = RunRecord.read(prepared.paths.metrics)
    if record is None:
        return RunResult.failed("the run's processes ended without writing its record")
    return RunResult.from_record(prepared.paths.run_dir, record)


def _join(context) -> None:
    """Wait for the processes; a stop (Ctrl-C, SIGTERM) reaching this process is passed on to them,
    and they save at their next step boundary, together, before the stop goes on."""
    try:
        while not context.join(timeout=1.0, grace_period=10.0):
            pass
    except (KeyboardInterrupt, RunInterrupted):
        for process in context.processes:
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)
        for process in context.processes:
            process.join(60)
            if process.is_alive():
                process.kill()
        raise RunInterrupted("interrupted; run the same command again to resume from last.pth") from None


def rank_main(index: int, task, folder: str, nproc: int, launcher_alive):
    """Process `index` of the run (spawned by `launch`): join the group, train with the others."""
    from ..run.experiment import run_experiment
    from ..training.distributed.world import init_group, leave_group

    _die_with_launcher(launcher_alive)
    signal.signal(signal.SIGTERM, raise_interrupt)  # held to the next step boundary, as in one process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the launcher, which passes it on as SIGTERM
    os.environ.update(RANK=str(index), LOCAL_RANK=str(index), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))
    _loopback_only()
    _visible_gpus(task)
    try:
        world = init_group(_backend(task), _timeout(task), init_method=Path(folder, "rendezvous").as_uri())
        _set_threads(task, world.size)
        result = run_experiment(task.experiment, task.workspace, restart=task.restart,
                                console=task.console and index == 0, callbacks=_callbacks(task, index))
        if result is not None and result.status in (Status.FAILED, Status.INTERRUPTED):
            raise RunFailed(result.error or "failed")  # the others must not wait for rank 0: it ends them
    except (KeyboardInterrupt, RunInterrupted):
        if index == 0:
            raise  # rank 0 recorded the run as interrupted
        return
    except BaseException as exc:
        kind = "peer" if type(exc).__name__ == "PeerLost" or "another process of this run" in str(exc) else "own"
        Path(folder, f"rank-{index}.reason").write_text(f"{kind}\t{one_line(exc) or type(exc).__name__}")
        raise
    leave_group()


def _visible_gpus(task) -> None:
    """The cell's GPUs (`gpu_id`, from --gpus or Ray) as this process's CUDA devices, before CUDA starts:
    process i then trains on the cell's i-th GPU (RecBole sets the same variable later, too late)."""
    gpus = task.experiment.runtime.get("gpu_id")
    if gpus not in (None, ""):
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpus)


def _loopback_only() -> None:
    """gloo (and NCCL's bootstrap) connect the processes over the loopback interface, never the network."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    if names:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", names[0])
        os.environ.setdefault("NCCL_SOCKET_IFNAME", names[0])


def _first_failure(metrics: Path, exc, context, folder: Path) -> RunResult:
    """The run's record as its first failure left it: a process's own reason (`failed`), or the
    signal that killed one (`interrupted`: the same command resumes from last.pth)."""
    reasons = sorted(folder.glob("rank-*.reason"), key=lambda path: path.stat().st_mtime)
    own = [path for path in reasons if path.read_text().startswith("own")]
    silent = [path for path in reasons if "timed out" in path.read_text().lower() or "timeout" in path.read_text()]
    killed = [i for i, process in enumerate(context.processes) if (process.exitcode or 0) < 0]
    if own:
        rank = own[0].stem.split("-")[1]
        status, reason = Status.FAILED, f"process {rank} of the run failed: {own[0].read_text().split(chr(9), 1)[1]}"
    elif silent:  # a process stopped answering: the others waited ddp_timeout, then the launcher ended it
        status, reason = Status.FAILED, ("a process of the run stopped answering for ddp_timeout seconds (a hang); "
                                         f"process {silent[0].stem.split('-')[1]} said: "
                                         f"{silent[0].read_text().split(chr(9), 1)[1]}")
    elif killed or getattr(exc, "signal_name", None):
        rank = getattr(exc, "signal_name", None) and exc.error_index
        rank = killed[0] if rank is None else rank
        name = getattr(exc, "signal_name", None) or f"signal {-context.processes[rank].exitcode}"
        status, reason = Status.INTERRUPTED, f"process {rank} of the run was killed ({name}); the same command resumes it"
    else:
        status, reason = Status.FAILED, f"process {exc.error_index} of the run failed: {one_line(exc)}"
    record = RunRecord.read(metrics)
    if record is None:
        return RunResult.failed(reason, status)
    if record.status not in (Status.OK, Status.PRUNED):
        record.status, record.error = status, reason
        record.write(metrics)
    return RunResult.from_record(metrics.parent, record)


def _backend(task) -> str:
    import torch

    return "nccl" if task.experiment.runtime.get("gpu_id") not in (None, "") and torch.cuda.is_available() else "gloo"


def _timeout(task) -> float:
    from ..config.params import RECRUNNER_DEFAULTS

    return float({**task.experiment.params, **task.experiment.runtime}.get("ddp_timeout")
                 or RECRUNNER_DEFAULTS["ddp_timeout"])


def _set_threads(task, processes: int) -> None:
    import torch

    total = task.threads or os.cpu_count() or 1
    torch.set_num_threads(max(1, total // processes))


def _callbacks(task, rank: int) -> tuple:
    """The task's own callbacks on every process; a search's pruner on rank 0 only (it alone reports
    to the study; its decision reaches the others with rank 0's requests)."""
    if task.trial is None or rank != 0:
        return tuple(task.callbacks)
    from ..training.callbacks.pruning import OptunaPruning

    return (*task.callbacks, OptunaPruning(task.trial))


class RunFailed(Exception):
    """Rank 0 recorded the run as failed: its process fails too, so the launcher ends the others."""


def _die_with_launcher(launcher_alive) -> None:
    """SIGKILL this process when the launcher is gone, however it went (SIGKILL, the OOM killer): a
    thread waits on a pipe whose other end only the launcher holds, readable at end-of-file once it
    is gone. Processes left training would still be at work when the same command runs again."""
    import threading

    def watch():
        try:
            launcher_alive.poll(None)
        except (OSError, EOFError, ValueError):
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="recrunner-launcher-watch", daemon=True).start()


# ---------------------------------------------------------------------- under torchrun
def torchrun_world():
    """This process's World when torchrun started it (WORLD_SIZE > 1 in the environment), group joined."""
    if int(os.environ.get("WORLD_SIZE", "1")) < 2 or "RANK" not in os.environ:
        return None
    from ..training.distributed.world import current, init_group
    import torch

    world = current()
    if world is None:
        backend = "nccl" if torch.cuda.is_available() and os.environ.get("RECRUNNER_BACKEND") != "gloo" else "gloo"
        world = init_group(backend, float(os.environ.get("RECRUNNER_DDP_TIMEOUT", 300)))
    return world


def hand_over(world, task) -> None:
    """Rank 0, under torchrun: the next cell the other processes train with it (None: the sweep is over)."""
    world.share(task)


def follow_sweep(world) -> int:
    """Ranks > 0 under torchrun: train every cell rank 0 hands over, until it says the sweep is over."""
    from ..run.experiment import run_experiment

    signal.signal(signal.SIGTERM, raise_interrupt)
    while (task := world.share(None)) is not None:
        try:
            run_experiment(task.experiment, task.workspace, restart=task.restart, console=False,
                           callbacks=tuple(task.callbacks))
        except (KeyboardInterrupt, RunInterrupted):
            return 130
    return 0
