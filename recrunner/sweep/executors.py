"""Where cells run: here (one at a time), in fresh local processes (--workers N), or on Ray.

Every executor has the same small interface the sweep loop drives:
`free_slots()`, `submit(key, task)`, `wait(timeout) -> [(key, result)]`, `running()`,
`resident() -> {key: MiB}` and `gpus() -> {key: GPU ids}` (the running cells' memory and GPUs, where
the executor can see them), `stop()`.
Local workers and Ray tasks get a fresh process per cell, so no global state (RecBole's logger,
seeds, CUDA caches) passes from one cell to the next; local ones are forked from a server that has
already imported what a run needs (sweep/preload.py), so a cell starts in a fraction of a second.
"""

from __future__ import annotations

import multiprocessing.connection
import signal
from dataclasses import replace

from . import forkserver
from ..core.errors import ConfigError
from ..run.result import RunResult
from .distributed import requested_processes
from .memory import KILLED, resident_mb
from .worker import Task, child_main, default_threads, on_gpu, ray_entry, run_task


class InProcess:
    """--workers 1: cells run in this process, one after another; Ctrl-C and SIGTERM reach them."""

    def __init__(self, console: bool = True):
        self.console = console
        self._done: list = []

    def free_slots(self) -> int:
        return 0 if self._done else 1  # a finished cell is handed over (wait) before the next starts

    def submit(self, key, task: Task) -> None:
        self._done.append((key, run_task(replace(task, console=self.console))))

    def wait(self, timeout: float) -> list:
        done, self._done = self._done, []
        return done

    def running(self) -> list:
        return []

    def resident(self) -> dict:
        return {}

    def gpus(self) -> dict:
        return {}

    def stop(self) -> None:
        pass


class LocalProcesses:
    """--workers N: up to N cells at once, each in a fresh process with its share of CPU threads."""

    def __init__(self, workers: int, gpus: tuple[int, ...] = (), gpus_per_cell: int = 1):
        self.workers = workers
        self.free_gpus = list(gpus)
        self.use_gpus = bool(gpus)
        self.gpus_per_cell = gpus_per_cell  # --nproc N: a cell's N processes, one GPU each
        self.active: dict = {}  # key -> (process, connection, its GPUs)

    def free_slots(self) -> int:
        slots = self.workers - len(self.active)
        return min(slots, len(self.free_gpus) // self.gpus_per_cell) if self.use_gpus else slots

    def submit(self, key, task: Task) -> None:
        gpu = [self.free_gpus.pop(0) for _ in range(self.gpus_per_cell)] if self.use_gpus else None
        task = on_gpu(task, gpu or [])
        receiver, sender = forkserver.context().Pipe()  # duplex: the worker sees this end close (worker.py)
        process = forkserver.context().Process(target=child_main, args=(task, sender), name=f"recrunner-cell-{key}")
        process.start()
        sender.close()
        self.active[key] = (process, receiver, gpu)

    def wait(self, timeout: float) -> list:
        if not self.active:
            return []
        waitables = [w for process, receiver, _ in self.active.values() for w in (receiver, process.sentinel)]
        multiprocessing.connection.wait(waitables, timeout)
        done = []
        for key, (process, receiver, gpu) in list(self.active.items()):
            result = None
            if receiver.poll():
                try:
                    result = receiver.recv()
                except EOFError:
                    result = None
            if result is None and process.is_alive():
                continue
            process.join(timeout=30)
            if result is None:
                result = RunResult.failed(died(process.exitcode))
            receiver.close()
            del self.active[key]
            if gpu is not None:
                self.free_gpus.extend(gpu)
            done.append((key, result))
        return done

    def running(self) -> list:
        return list(self.active)

    def gpus(self) -> dict:
        """Each running cell's GPUs, where it has some."""
        return {key: tuple(gpu) for key, (_, _, gpu) in self.active.items() if gpu}

    def resident(self) -> dict:
        """Each running cell's resident memory in MiB, its process tree's (sweep/memory.py)."""
        found = {key: resident_mb(process.pid) for key, (process, _, _) in self.active.items()}
        return {key: mb for key, mb in found.items() if mb is not None}

    def stop(self) -> None:
        """SIGTERM every worker (each records its run as interrupted), then make sure they are gone."""
        for process, _, _ in self.active.values():
            if process.is_alive():
                process.terminate()
        for process, _, _ in self.active.values():
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
                process.join()
        self.active.clear()


class RayCluster:
    """--backend ray: each cell a Ray task (fresh worker process, one GPU where GPUs exist)."""

    def __init__(self, workers: int | None, address: str | None, threads: int, gpus_per_cell: float):
        import warnings

        try:
            with warnings.catch_warnings():  # ray announces its own deprecations on import
                warnings.simplefilter("ignore")
                import ray
        except ImportError as exc:
            raise ConfigError(f"--backend ray needs Ray, an optional extra: bash install.sh ray (or pip install "
                              f"'ray>=2.9'); importing it failed: {exc}") from None
        self.ray = ray
        self.started_here = not ray.is_initialized()
        if self.started_here:
            kwargs = {"address": address} if address else {"include_dashboard": False}
            ray.init(ignore_reinit_error=True, log_to_driver=False, configure_logging=False, **kwargs)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = workers or max(1, cpus // max(1, threads))
        self.remote = ray.remote(max_calls=1, num_cpus=threads, num_gpus=gpus_per_cell)(ray_entry)
        self.threads, self.gpus_per_cell = threads, gpus_per_cell
        self.active: dict = {}  # ObjectRef -> key

    def free_slots(self) -> int:
        return self.slots - len(self.active)

    def submit(self, key, task: Task) -> None:
        processes = requested_processes(task)  # --nproc N: the cell's N processes on one node, N GPUs where used
        remote = self.remote if processes == 1 else self.remote.options(
            num_cpus=self.threads * processes, num_gpus=self.gpus_per_cell * processes)
        self.active[remote.remote(task)] = key

    def wait(self, timeout: float) -> list:
        if not self.active:
            return []
        ready, _ = self.ray.wait(list(self.active), num_returns=1, timeout=timeout)
        done = []
        for ref in ready:
            key = self.active.pop(ref)
            try:
                result = self.ray.get(ref)
            except self.ray.exceptions.RayError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                result = RunResult.failed(f"Ray: {type(exc).__name__}: {first}")
            done.append((key, result))
        return done

    def running(self) -> list:
        return list(self.active.values())

    def resident(self) -> dict:
        return {}  # Ray places its tasks by its own memory resource

    def gpus(self) -> dict:
        return {}

    def stop(self) -> None:
        for ref in list(self.active):
            self.ray.cancel(ref, force=True)
        self.active.clear()
        if self.started_here:
            self.ray.shutdown()


def executor_for(options):
    """Where a sweep's cells run, from its options (runner.SweepOptions): Ray, fresh local processes, or here."""
    if options.backend == "ray":
        return RayCluster(options.workers if options.workers > 1 else None, options.ray_address, cell_threads(options),
                          gpus_per_cell=1 if options.gpus else 0)
    if forkserver.serves(options.backend, options.workers, options.gpus):
        return LocalProcesses(max(options.workers, 1), options.gpus, gpus_per_cell=options.nproc)
    return InProcess(console=options.console)


def cell_threads(options) -> int | None:
    """CPU threads per cell: --threads, else the cores shared by the workers; in process torch's own default."""
    if options.threads:
        return options.threads
    if options.workers > 1 or options.backend == "ray":
        return default_threads(options.workers)
    return None


def died(exitcode: int | None) -> str:
    """The reason a worker process ended without a result (pure)."""
    if exitcode == -signal.SIGKILL:
        return f"{KILLED} (out of memory? the kernel's OOM killer sends SIGKILL)"
    if exitcode is not None and exitcode < 0:
        return f"worker process killed by {signal.Signals(-exitcode).name}"
    return f"worker process exited with code {exitcode} without a result"


def check_gpus(gpus) -> None:
    """`--gpus` names GPUs this machine has (a one-line error otherwise)."""
    import torch

    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not available:
        raise ConfigError(f"--gpus {','.join(map(str, gpus))}: this machine has no CUDA device (torch "
                          f"{torch.__version__}); drop --gpus to run on the CPU")
    missing = [g for g in gpus if g >= available]
    if missing:
        raise ConfigError(f"--gpus: no GPU {', '.join(map(str, missing))}; this machine has {available} "
                          f"(0..{available - 1})")
