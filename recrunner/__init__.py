"""recrunner: run RecBole experiments with an exact loop, full TensorBoard, checkpoints and resume."""

__version__ = "0.1.0"

from .errors import CheckpointError, ConfigError, DatasetNotFoundError, RecrunnerError, RunInterrupted  # noqa: E402
from .experiment import Experiment, RunResult, Workspace, prepare, run_experiment  # noqa: E402
from .trainer import CustomTrainer  # noqa: E402
from .callbacks import Callback, TrainerControl  # noqa: E402

__all__ = [
    "Callback", "CheckpointError", "ConfigError", "CustomTrainer", "DatasetNotFoundError", "Experiment",
    "RecrunnerError", "RunInterrupted", "RunResult", "TrainerControl", "Workspace", "prepare", "run_experiment",
]
