"""The arguments of a training run."""

from __future__ import annotations

from dataclasses import dataclass

from accelerate.utils import LoggerType

from ...models.config_utils import invalid
from .schedules import SCHEDULES

OPTIMIZERS = ("sgd", "adamw")
MIXED_PRECISIONS = ("no", "fp16", "bf16")
TRACKERS = tuple(t.value for t in LoggerType)  # tensorboard, wandb, mlflow, ... and "all"


@dataclass
class EngineArguments:
    """What shapes a training run apart from the data and the model (the model's shape is its config).

    ``max_steps`` and ``max_train_minutes`` stop a run early and cleanly (evaluate, checkpoint,
    save). ``lr_scheduler`` is one of ``"zaremba"`` (``decay_start_epoch``, ``decay_factor``),
    ``"cosine"`` (``min_lr_ratio``), ``"noam"`` (Vaswani et al. 2017: ``learning_rate`` scales
    ``d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)``) or ``"constant"``; the others take
    a linear ``warmup_steps`` ramp. An update reads ``gradient_accumulation_steps`` batches (the last one
    of an epoch reads what is left) and all steps and schedules count updates.
    ``resume_from_checkpoint`` is ``"latest"`` (the newest checkpoint of ``output_dir``, if any) or a
    checkpoint folder.
    """

    output_dir: str
    num_train_epochs: int = 1
    max_steps: int | None = None
    max_train_minutes: float | None = None
    learning_rate: float = 1.0
    optimizer: str = "sgd"
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.0
    lr_scheduler: str = "constant"
    decay_start_epoch: int = 4
    decay_factor: float = 0.5
    min_lr_ratio: float = 0.0
    warmup_steps: int = 0
    gradient_accumulation_steps: int = 1
    max_grad_norm: float | None = 5.0
    seed: int = 42
    checkpointing_steps: int | None = None
    save_total_limit: int | None = 2
    resume_from_checkpoint: str | None = None
    logging_steps: int = 50
    plot: bool = True
    generation_max_new_tokens: int = 200
    mixed_precision: str = "no"
    use_cpu: bool = False
    disable_tqdm: bool = False
    report_to: str = "none"
    gradient_checkpointing: bool = False
    torch_compile: bool = False

    def __post_init__(self):
        for name in ("num_train_epochs", "gradient_accumulation_steps", "logging_steps", "generation_max_new_tokens"):
            if getattr(self, name) < 1:
                raise invalid(name, getattr(self, name), "an integer >= 1")
        for name in ("max_steps", "checkpointing_steps", "save_total_limit"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise invalid(name, getattr(self, name), "None or an integer >= 1")
        if self.max_train_minutes is not None and self.max_train_minutes <= 0:
            raise invalid("max_train_minutes", self.max_train_minutes, "None or a positive number of minutes")
        if self.learning_rate <= 0:
            raise invalid("learning_rate", self.learning_rate, "a positive number")
        if self.optimizer not in OPTIMIZERS:
            raise invalid("optimizer", self.optimizer, "one of " + ", ".join(map(repr, OPTIMIZERS)))
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise invalid(name, getattr(self, name), "a number in [0, 1)")
        if self.adam_epsilon <= 0:
            raise invalid("adam_epsilon", self.adam_epsilon, "a positive number")
        if self.lr_scheduler not in SCHEDULES:
            raise invalid("lr_scheduler", self.lr_scheduler, "one of " + ", ".join(map(repr, SCHEDULES)))
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise invalid("max_grad_norm", self.max_grad_norm, "None (no clipping) or a positive number")
        if self.mixed_precision not in MIXED_PRECISIONS:
            raise invalid("mixed_precision", self.mixed_precision, "one of " + ", ".join(map(repr, MIXED_PRECISIONS)))
        unknown = [name for name in self.trackers if name not in TRACKERS]
        if unknown:
            raise invalid("report_to", self.report_to, "'none', 'all' or a comma-separated list of "
                          + ", ".join(map(repr, TRACKERS)))

    @property
    def trackers(self) -> list[str]:
        """The experiment trackers of ``report_to`` (``"tensorboard,wandb"`` → two names; ``"none"`` → none)."""
        names = [name.strip() for name in self.report_to.split(",") if name.strip()]
        return [] if names in ([], ["none"]) else names


__all__ = ["EngineArguments", "MIXED_PRECISIONS", "OPTIMIZERS", "TRACKERS"]
