"""Where everything lives on disk: the one home of every file and folder name of an output tree.

    <output>/                                   OutputPaths
        .cache/data/                            the shared dataset cache (recrunner.data.cache)
        .cache/replaced/<sweep>/<dataset>/...   a run `--restart` replaces, until the new one trains
        .cache/compile/                         torch.compile's cache, shared by fast runs (training.fast)
        hparams-columns/                        the HParams columns of every run below (run/hparams_columns.py)
        <sweep>/                                SweepPaths
            sweep.jsonl  results.csv  results.md  report/  search/study.journal  search/trials.json  mlruns/
            final/<dataset>/<model>/<run id>/   a search's final seeds, a race pick's missing seeds
            select/<dataset>/<model>/<run id>/  racing: the contenders' seed runs
            selection.json                      racing: the races so far (sweep/selection.py)
            <dataset>/<model>/<run id>/         RunPaths
                config.yaml  run.log  metrics.json  history.jsonl  test_per_user.npz  valid_per_user.npz
                events.out.tfevents.*  events.out.tfevents.0000000000.hparams
                checkpoints/best.pth  checkpoints/last.pth  [checkpoints/epoch-NNNN.pth]
                [steps/events.out.tfevents.*]             the optimizer-step axis (eval_every_steps, log_every_steps)
                [<stage>/checkpoints/..., <stage>/events...]    S3Rec, RaCT: a pre-training stage

Nothing else in recrunner spells one of these names (tests/test_layout.py checks); every path is
derived from the folder a caller names, never from the working directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HPARAMS_ROW = "events.out.tfevents.0000000000.hparams"  # a run's HParams row; the columns' file has the same name
FINAL = "final"  # a search's final seeds: the folder under the sweep, and their record's role
SELECT = "select"  # racing's seed runs of the contenders (sweep/selection.py): their folder and role


@dataclass(frozen=True)
class CheckpointPaths:
    """A folder of checkpoints: a run's (or stage's) checkpoints/, or any `checkpoint_dir` given to
    CustomTrainer directly."""

    folder: Path

    @property
    def best(self) -> Path:
        """Weights of the best validation epoch: what test scoring loads (an export, not a state)."""
        return self.folder / "best.pth"

    @property
    def last(self) -> Path:
        """The full training state after the newest epoch: what resume loads."""
        return self.folder / "last.pth"

    def epoch_copy(self, epoch: int) -> Path:
        return self.folder / f"epoch-{epoch:04d}.pth"

    def epoch_copies(self) -> list[Path]:
        """Newest first."""
        return sorted(self.folder.glob("epoch-*.pth"), reverse=True)


@dataclass(frozen=True)
class RunPaths:
    """One run's folder (or a pre-training stage's, `stage`)."""

    run_dir: Path

    @property
    def config(self) -> Path:
        return self.run_dir / "config.yaml"

    @property
    def log(self) -> Path:
        return self.run_dir / "run.log"

    @property
    def metrics(self) -> Path:
        """The run's record (recrunner.run.record.RunRecord owns the format)."""
        return self.run_dir / "metrics.json"

    @property
    def history(self) -> Path:
        """One JSON line per validation (training/callbacks/history.py writes, `read_history` reads)."""
        return self.run_dir / "history.jsonl"

    @property
    def test_per_user(self) -> Path:
        """Per-user test metrics (run/per_user.py)."""
        return self.run_dir / "test_per_user.npz"

    @property
    def valid_per_user(self) -> Path:
        """Per-user validation metrics of the best weights (run/per_user.py): racing reads these."""
        return self.run_dir / "valid_per_user.npz"

    @property
    def hparams_row(self) -> Path:
        return self.run_dir / HPARAMS_ROW

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def checkpoint_files(self) -> CheckpointPaths:
        return CheckpointPaths(self.checkpoints)

    @property
    def best(self) -> Path:
        return self.checkpoint_files.best

    @property
    def last(self) -> Path:
        return self.checkpoint_files.last

    def epoch_copies(self) -> list[Path]:
        return self.checkpoint_files.epoch_copies()

    @property
    def step_events(self) -> Path:
        """TensorBoard's optimizer-step axis (Valid-step/, Train-step/): its own folder, purged on its own steps."""
        return self.run_dir / "steps"

    def event_files(self) -> list[Path]:
        return sorted(self.run_dir.glob("events.out.tfevents.*"))

    def stage(self, name: str) -> "RunPaths":
        """A pre-training stage's own folder inside the run (S3Rec, RaCT)."""
        return RunPaths(self.run_dir / name)

    def create(self) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class SweepPaths:
    """A sweep's folder: its record, its tables, its search and its runs."""

    sweep_dir: Path

    @property
    def record(self) -> Path:
        """The sweep's record, one JSON line per event (sweep/record.py owns the format)."""
        return self.sweep_dir / "sweep.jsonl"

    @property
    def results_csv(self) -> Path:
        return self.sweep_dir / "results.csv"

    @property
    def results_md(self) -> Path:
        return self.sweep_dir / "results.md"

    @property
    def report(self) -> Path:
        """`recrunner report`'s default folder."""
        return self.sweep_dir / "report"

    @property
    def selection(self) -> Path:
        """The races of a sweep that races its best configurations over seeds (sweep/selection.py)."""
        return self.sweep_dir / "selection.json"

    @property
    def study_journal(self) -> Path:
        """A search's Optuna studies, when no --storage URL is given."""
        return self.sweep_dir / "search" / "study.journal"

    @property
    def asked(self) -> Path:
        """A search's trials asked so far per study, and the configurations they drew (report/budget.py)."""
        return self.sweep_dir / "search" / "trials.json"

    @property
    def mlruns(self) -> Path:
        """MLflow's default store for the sweep's runs (trackers: [mlflow])."""
        return self.sweep_dir / "mlruns"

    def run(self, dataset: str, model: str, run_id: str) -> RunPaths:
        return RunPaths(self.sweep_dir / dataset / model / run_id)

    def run_records(self) -> list[Path]:
        """Every run record below the sweep (its final seeds' included), sorted."""
        return sorted(self.sweep_dir.rglob("metrics.json"))


@dataclass(frozen=True)
class OutputPaths:
    """An output folder (`--output`, default `runs`): sweeps, the shared cache, the HParams columns."""

    root: Path

    @property
    def data_cache(self) -> Path:
        """Preprocessed datasets shared by every run and sweep below (recrunner.data.cache)."""
        return self.root / ".cache" / "data"

    @property
    def compile_cache(self) -> Path:
        """torch.compile's cache (TORCHINDUCTOR_CACHE_DIR), shared by the fast runs below (training.fast)."""
        return self.root / ".cache" / "compile"

    def set_aside(self, run_dir: Path) -> Path:
        """Where `--restart` keeps the run at `run_dir` until its replacement trains (run/resume.py)."""
        return self.root / ".cache" / "replaced" / Path(run_dir).relative_to(self.root)

    @property
    def hparams_columns(self) -> Path:
        """TensorBoard's run "hparams-columns": the columns of every run below (run/hparams_columns.py)."""
        return self.root / "hparams-columns"

    def sweep(self, name: str) -> SweepPaths:
        return SweepPaths(self.root / name)

    def run(self, sweep: str, dataset: str, model: str, run_id: str) -> RunPaths:
        return self.sweep(sweep).run(dataset, model, run_id)

    @classmethod
    def of_run(cls, run_dir: Path) -> "OutputPaths":
        """The output folder holding a run directory (`runs` of runs/<sweep>/<dataset>/<model>/<run id>)."""
        return cls(Path(run_dir).resolve().parents[3])

