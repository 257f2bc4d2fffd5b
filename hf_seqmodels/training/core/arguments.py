"""The arguments of a training run, in the vocabulary of transformers' ``TrainingArguments``.

Every field that transformers' ``TrainingArguments`` also has carries its name and its meaning (``--optim``,
``--lr_scheduler_type``, ``--save_steps``, ``--bf16``, ``--eval_strategy``, ``--report_to``...), so a
command written for transformers' example scripts reads the same here. Only what the loop implements is
a field: a flag that would be silently ignored does not exist. The package's own additions are few and
named for what they do: ``max_time_minutes`` (a clean stop on a time cap), ``overwrite_output_dir`` (a
new run in a folder holding another run's checkpoints; transformers 5 dropped the flag), ``plot``,
``debug`` (tracebacks for command-line errors), ``pad_to_multiple_of`` (transformers' collators' name).

**Recipes.** The optimisation fields a paper fixes (``optim``, ``learning_rate``, ``lr_scheduler_type``,
``warmup_steps``, ``weight_decay``, the Adam constants, ``max_grad_norm``, ``num_train_epochs``,
``max_steps``, the batch size, the task's window length, ``bf16``, ``bf16_weights`` and ``torch_compile``) default
to ``None``:
:meth:`EngineArguments.with_recipe` fills them from the preset's training recipe
(:func:`hf_seqmodels.registry.training_recipe`), then from transformers' defaults. A flag given on the command
line always wins. A recipe's ``bf16`` applies only on a device that runs bf16 faster than fp32 (a GPU with bf16, a
CPU with AVX512-BF16 or AMX; :mod:`.precision`), its ``torch_compile`` on a GPU only, and its ``bf16_weights`` on
a GPU where the run's bf16 is on. A recipe's learning rate,
schedule and optimizer constants belong to its optimizer: with another ``--optim`` they are not taken, and the
optimizer's own defaults apply (SGD's learning rate of 1.0 never reaches AdamW). The names a recipe may use are
:mod:`hf_seqmodels.recipes`'s; one that no task knows is an error naming it. A run fills its arguments once, where
it starts; the training loop refuses arguments left unfilled.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from accelerate.utils import LoggerType

from ...models.config_utils import invalid
from ...recipes import (
    DEFAULT_LEARNING_RATES,
    OPTIMIZER_BOUND,
    OPTIMIZERS,
    RECIPE_KEYS,
    SCHEDULE_KWARGS,
    SCHEDULE_OPTIONS,
    SCHEDULES,
    TASK_KEYS,
    schedule_options,
)
from .precision import gpu_recipe_setting_applies, recipe_bf16_applies

STRATEGIES = ("no", "steps", "epoch")
#: what a field is when neither the command line nor the recipe sets it (transformers' defaults, except the
#: learning rate: transformers' 5e-5 suits fine-tuning a pretrained model, not training one from scratch)
FALLBACKS: dict[str, Any] = {
    "optim": "adamw_torch", "lr_scheduler_type": "linear", "warmup_steps": 0, "weight_decay": 0.0,
    "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8, "max_grad_norm": 1.0, "num_train_epochs": 3.0,
    "gradient_accumulation_steps": 1, "max_steps": -1, "bf16": False, "bf16_weights": False,
    "torch_compile": False,
}
TRACKERS = tuple(t.value for t in LoggerType)  # accelerate's: tensorboard, wandb, mlflow, ... and "all"


def _help(text: str) -> dict[str, Any]:
    return {"help": text}


@dataclass
class EngineArguments:
    """What shapes a training run apart from the model and the data (see the module docstring).

    Epochs, steps and schedules count optimizer updates; an update reads ``gradient_accumulation_steps``
    batches (the last of an epoch reads what is left). ``num_train_epochs`` may be fractional; ``max_steps``
    > 0 overrides it. ``warmup_steps``, ``logging_steps``, ``eval_steps`` and ``save_steps`` below 1 are
    fractions of the total number of updates, as in transformers.
    """

    output_dir: str = field(metadata=_help("folder of the checkpoints, the final model, its card, results and plots"))
    overwrite_output_dir: bool = field(default=False, metadata=_help(
        "start afresh in an output folder that holds another run's checkpoints (they are deleted)"))
    do_train: bool = field(default=False, metadata=_help("train (default: train and evaluate when none of "
                                                         "--do_train/--do_eval/--do_predict is given)"))
    do_eval: bool = field(default=False, metadata=_help("evaluate on the validation data"))
    do_predict: bool = field(default=False, metadata=_help("predict the test data after training"))
    per_device_train_batch_size: int | None = field(default=None, metadata=_help(
        "batch size per process (default: the preset's recipe)"))
    per_device_eval_batch_size: int | None = field(default=None, metadata=_help(
        "evaluation batch size per process (default: the task's)"))
    gradient_accumulation_steps: int | None = field(default=None, metadata=_help(
        "batches per update; their losses are weighted so that the update sees the mean over all their targets "
        "(default: recipe, 1)"))
    learning_rate: float | None = field(default=None, metadata=_help(
        "peak learning rate (default: the recipe's for its optimizer, else 1.0 for sgd and 1e-3 for AdamW)"))
    weight_decay: float | None = field(default=None, metadata=_help("decoupled weight decay (default: recipe, 0)"))
    adam_beta1: float | None = field(default=None, metadata=_help("AdamW beta1 (default: recipe, 0.9)"))
    adam_beta2: float | None = field(default=None, metadata=_help("AdamW beta2 (default: recipe, 0.999)"))
    adam_epsilon: float | None = field(default=None, metadata=_help("AdamW epsilon (default: recipe, 1e-8)"))
    max_grad_norm: float | None = field(default=None, metadata=_help(
        "clip the gradient norm to this; 0 turns clipping off (default: recipe, 1.0)"))
    num_train_epochs: float | None = field(default=None, metadata=_help("passes over the data (default: recipe, 3)"))
    max_steps: int | None = field(default=None, metadata=_help(
        "> 0: stop after this many updates (overrides the epochs); -1: the epochs decide (default: recipe, -1)"))
    lr_scheduler_type: str | None = field(default=None, metadata=_help(
        f"one of {', '.join(SCHEDULES)} (default: recipe, linear)"))
    lr_scheduler_kwargs: str | None = field(default=None, metadata=_help(
        'the schedule\'s options as JSON, e.g. \'{"decay_start_epoch": 4, "decay_factor": 0.5}\' (zaremba), '
        '\'{"min_lr_ratio": 0.1}\' (cosine)'))
    warmup_steps: float | None = field(default=None, metadata=_help(
        "linear warm-up updates; < 1: a fraction of all updates (noam: the paper's warmup_steps)"))
    optim: str | None = field(default=None, metadata=_help(f"one of {', '.join(OPTIMIZERS)} (default: recipe)"))
    logging_steps: float = field(default=500, metadata=_help("log the mean training loss every N updates"))
    eval_strategy: str = field(default="epoch", metadata=_help(
        "when to evaluate during training: no, steps (every --eval_steps), epoch; the end of training always "
        "evaluates when --do_eval"))
    eval_steps: float | None = field(default=None, metadata=_help("with --eval_strategy steps (default: logging_steps)"))
    save_strategy: str = field(default="steps", metadata=_help(
        "when to checkpoint: no, steps (every --save_steps), epoch; the end of training and a stop signal "
        "always checkpoint"))
    save_steps: float = field(default=500, metadata=_help("with --save_strategy steps"))
    save_total_limit: int | None = field(default=None, metadata=_help(
        "keep at most this many checkpoints (the newest and the best one are always kept)"))
    load_best_model_at_end: bool = field(default=False, metadata=_help(
        "save the best checkpoint's weights (by --metric_for_best_model) as the final model; needs evaluation and "
        "a --save_strategy (and --save_steps a multiple of --eval_steps) matching --eval_strategy"))
    metric_for_best_model: str | None = field(default=None, metadata=_help(
        "the evaluation metric that ranks checkpoints, with or without its eval_ prefix (default: loss with "
        "--load_best_model_at_end)"))
    greater_is_better: bool | None = field(default=None, metadata=_help(
        "whether a larger --metric_for_best_model is better (default: False for a metric ending in loss, else True)"))
    early_stopping_patience: int | None = field(default=None, metadata=_help(
        "stop after this many evaluations in a row without improving --metric_for_best_model (transformers' "
        "EarlyStoppingCallback)"))
    early_stopping_threshold: float = field(default=0.0, metadata=_help(
        "with --early_stopping_patience: by how much the metric must beat the best to count as an improvement"))
    seed: int = field(default=42, metadata=_help("seed of the initialisation, the data order and dropout"))
    bf16: bool | None = field(default=None, metadata={**_help(
        "bfloat16 mixed precision (accelerate autocast, fp32 master weights); --bf16 False turns a recipe's off "
        "(default: recipe, False)"), "nargs": "?", "const": True})  # a bare --bf16 is True, as in transformers
    bf16_weights: bool | None = field(default=None, metadata={**_help(
        "with --bf16: train with bfloat16 weights and a float32 master copy of them in the optimizer (half the "
        "weight traffic of the forward and backward); checkpoints and the saved model hold the float32 weights; one "
        "process or DDP (default: recipe on a GPU, False)"), "nargs": "?", "const": True})
    fp16: bool = field(default=False, metadata=_help("float16 mixed precision (GPU only)"))
    resume_from_checkpoint: str | None = field(default=None, metadata=_help(
        "'latest' (the newest checkpoint of --output_dir) or a checkpoint folder"))
    report_to: str = field(default="none", metadata=_help(
        f"experiment trackers: none, all, or a comma-separated list of {', '.join(TRACKERS)}"))
    dataloader_num_workers: int = field(default=0, metadata=_help(
        "worker processes reading batches (tasks that read through a DataLoader)"))
    dataloader_pin_memory: bool = field(default=True, metadata=_help(
        "on a CUDA GPU, pin the batches and copy them to it one update ahead, while the previous update runs"))
    pad_to_multiple_of: int | None = field(default=None, metadata=_help(
        "round the padded length of batches of varying length (translation, BERT, fine-tuning) up to a multiple of "
        "this; 1: no rounding (default: 8 on a GPU, 1 on a CPU)"))
    torch_compile: bool | None = field(default=None, metadata={**_help(
        "compile the training step with torch.compile, in one graph where the model allows (default: recipe on a "
        "GPU, False)"), "nargs": "?", "const": True})
    tf32: bool | None = field(default=None, metadata=_help(
        "TF32 tensor cores for float32 matrix products on a CUDA GPU (default: True on a GPU)"))
    torch_compile_backend: str | None = field(default=None, metadata=_help(
        "torch.compile's backend with --torch_compile (default: inductor)"))
    torch_compile_mode: str | None = field(default=None, metadata=_help(
        "torch.compile's mode with --torch_compile: default, reduce-overhead, max-autotune..."))
    gradient_checkpointing: bool = field(default=False, metadata=_help(
        "recompute activations in the backward pass (Transformer, BERT, recurrent stacks)"))
    disable_tqdm: bool = field(default=False, metadata=_help("no progress bars"))
    use_cpu: bool = field(default=False, metadata=_help("train on the CPU even when a GPU is present"))
    max_time_minutes: float | None = field(default=None, metadata=_help(
        "stop cleanly after this many minutes of training: checkpoint, evaluate, save the model"))
    generation_max_length: int | None = field(default=None, metadata=_help(
        "most new tokens a generation makes: in evaluation with --predict_with_generate and in the saved "
        "generation_config (default: the task's)"))
    plot: bool = field(default=True, metadata=_help("write the loss and learning-rate curves (and attention maps)"))
    debug: bool = field(default=False, metadata=_help("show the traceback of a command-line error"))

    def __post_init__(self):
        self.check()

    # ------------------------------------------------------------------------------------ checks
    def check(self) -> None:
        """Raise a ValueError naming the first field whose value is not allowed (unset fields pass)."""
        positive_ints = ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                         "generation_max_length", "pad_to_multiple_of")
        for name in positive_ints:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise invalid(name, value, "an integer >= 1")
        for name in ("learning_rate", "adam_epsilon", "num_train_epochs", "logging_steps", "save_steps"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise invalid(name, value, "a positive number")
        for name in ("weight_decay", "max_grad_norm", "warmup_steps"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise invalid(name, value, "a number >= 0")
        for name in ("adam_beta1", "adam_beta2"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise invalid(name, value, "a number in [0, 1)")
        if self.eval_steps is not None and not self.eval_steps > 0:
            raise invalid("eval_steps", self.eval_steps, "a positive number")
        if self.max_steps is not None and (self.max_steps == 0 or self.max_steps < -1):
            raise invalid("max_steps", self.max_steps, "-1 (the epochs decide) or an integer >= 1")
        if self.save_total_limit is not None and self.save_total_limit < 1:
            raise invalid("save_total_limit", self.save_total_limit, "an integer >= 1 (or leave it out: keep all)")
        if self.max_time_minutes is not None and not self.max_time_minutes > 0:
            raise invalid("max_time_minutes", self.max_time_minutes, "a positive number of minutes")
        if self.dataloader_num_workers < 0:
            raise invalid("dataloader_num_workers", self.dataloader_num_workers, "an integer >= 0")
        if self.optim is not None and self.optim not in OPTIMIZERS:
            raise invalid("optim", self.optim, "one of " + ", ".join(OPTIMIZERS))
        if self.lr_scheduler_type is not None and self.lr_scheduler_type not in SCHEDULES:
            raise invalid("lr_scheduler_type", self.lr_scheduler_type, "one of " + ", ".join(SCHEDULES))
        for name in ("eval_strategy", "save_strategy"):
            if getattr(self, name) not in STRATEGIES:
                raise invalid(name, getattr(self, name), "one of " + ", ".join(STRATEGIES))
        self._check_best_model()
        if self.bf16 and self.fp16:
            raise invalid("fp16", True, "False together with --bf16 (one mixed precision at a time)")
        unknown = [name for name in self.trackers if name not in TRACKERS]
        if unknown:
            raise invalid("report_to", self.report_to, "'none' or a comma-separated list of "
                          + ", ".join(map(repr, TRACKERS)))
        self.scheduler_kwargs  # noqa: B018  (checks the JSON and its keys)

    def _check_best_model(self) -> None:
        """transformers' conditions on keeping the best checkpoint and stopping early, as one-line errors."""
        if self.load_best_model_at_end:
            if self.eval_strategy == "no" or self.save_strategy != self.eval_strategy:
                raise invalid("load_best_model_at_end", True, "False unless --eval_strategy is steps or epoch and "
                              f"--save_strategy the same (got --eval_strategy {self.eval_strategy} and "
                              f"--save_strategy {self.save_strategy}): the best evaluation must have a checkpoint")
            eval_steps = self.logging_steps if self.eval_steps is None else self.eval_steps
            if self.eval_strategy == "steps" and (eval_steps < 1 or self.save_steps < 1) and eval_steps != self.save_steps:
                raise invalid("load_best_model_at_end", True, "False unless --save_steps and --eval_steps are equal "
                              "when either is a fraction of the run")
            if self.eval_strategy == "steps" and eval_steps >= 1 and self.save_steps % eval_steps:
                raise invalid("load_best_model_at_end", True, f"False unless --save_steps ({self.save_steps:g}) is a "
                              f"round multiple of --eval_steps ({eval_steps:g}): every checkpoint must be evaluated")
        if self.early_stopping_patience is not None:
            if isinstance(self.early_stopping_patience, bool) or self.early_stopping_patience < 1:
                raise invalid("early_stopping_patience", self.early_stopping_patience, "an integer >= 1")
            if self.eval_strategy == "no" or self.best_metric_name is None:
                raise invalid("early_stopping_patience", self.early_stopping_patience,
                              "unset unless --eval_strategy is steps or epoch and --metric_for_best_model (or "
                              "--load_best_model_at_end) names the metric to watch")
        if not self.early_stopping_threshold >= 0:
            raise invalid("early_stopping_threshold", self.early_stopping_threshold, "a number >= 0")

    # ------------------------------------------------------------------------------- derived values
    @property
    def best_metric_name(self) -> str | None:
        """The evaluation metric that ranks checkpoints (``eval_`` prefixed), as transformers takes it:
        ``metric_for_best_model``, else ``eval_loss`` with ``load_best_model_at_end``, else None (none is tracked)."""
        name = self.metric_for_best_model or ("loss" if self.load_best_model_at_end else None)
        if name is None:
            return None
        return name if name.startswith("eval_") else f"eval_{name}"

    @property
    def best_is_greater(self) -> bool:
        """``greater_is_better``, by default False for a metric ending in ``loss`` and True for any other."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not (self.best_metric_name or "eval_loss").endswith("loss")

    @property
    def trackers(self) -> list[str]:
        """The trackers of ``report_to`` (``"tensorboard,wandb"`` → two names; ``"none"`` → none; ``"all"``)."""
        names = [name.strip() for name in str(self.report_to).split(",") if name.strip()]
        return [] if names in ([], ["none"]) else names

    @property
    def mixed_precision(self) -> str:
        """accelerate's name of the precision: ``"bf16"``, ``"fp16"`` or ``"no"``."""
        return "bf16" if self.bf16 else "fp16" if self.fp16 else "no"

    @property
    def scheduler_kwargs(self) -> dict[str, Any]:
        """``lr_scheduler_kwargs`` as a dict, checked against what ``lr_scheduler_type`` takes."""
        if not self.lr_scheduler_kwargs:
            return {}
        try:
            kwargs = json.loads(self.lr_scheduler_kwargs) if isinstance(self.lr_scheduler_kwargs, str) \
                else dict(self.lr_scheduler_kwargs)
        except json.JSONDecodeError:
            raise invalid("lr_scheduler_kwargs", self.lr_scheduler_kwargs, "a JSON object") from None
        if not isinstance(kwargs, dict):
            raise invalid("lr_scheduler_kwargs", self.lr_scheduler_kwargs, "a JSON object")
        if self.lr_scheduler_type is not None:
            allowed = SCHEDULE_KWARGS[self.lr_scheduler_type]
            extra = sorted(set(kwargs) - set(allowed))
            if extra:
                raise invalid("lr_scheduler_kwargs", self.lr_scheduler_kwargs,
                              f"options of the {self.lr_scheduler_type} schedule: "
                              + (", ".join(allowed) if allowed else "none"))
        return kwargs

    @property
    def clip_norm(self) -> float | None:
        """The clipping norm, or None when ``max_grad_norm`` is 0 (no clipping)."""
        return self.max_grad_norm if self.max_grad_norm else None

    def steps(self, name: str, total_steps: int) -> int:
        """``logging_steps`` / ``eval_steps`` / ``save_steps`` / ``warmup_steps`` in updates (a value below 1 is
        a fraction of ``total_steps``)."""
        value = getattr(self, name)
        if name == "eval_steps" and value is None:
            value = self.logging_steps
        if name == "warmup_steps" and value == 0:
            return 0
        return max(1, math.ceil(value * total_steps)) if value < 1 else int(value)

    def total_steps(self, updates_per_epoch: int) -> int:
        """Updates of the whole run: ``max_steps`` when > 0, else ``ceil(num_train_epochs × updates_per_epoch)``."""
        return self.max_steps if self.max_steps > 0 else max(1, math.ceil(self.num_train_epochs * updates_per_epoch))

    # ------------------------------------------------------------------------------------ recipes
    def with_recipe(self, recipe: dict[str, Any] | None = None,
                    task_defaults: dict[str, Any] | None = None) -> EngineArguments:
        """A copy with every unset field filled: the command line (the fields that are not None), then the
        ``recipe`` (a preset's, in this task's fields: :meth:`recipe_fields`), then ``task_defaults``, then
        :data:`FALLBACKS`. Values the recipe binds to its optimizer are skipped when ``--optim`` chose another one;
        its ``bf16`` applies only where the run's device runs bf16 faster than fp32
        (:func:`.precision.recipe_bf16_applies`).

        A run fills its arguments once, where it starts (the command line, ``train_causal_lm`` and the other
        ``train_*`` functions, the demo); the training loop takes them filled (:meth:`unfilled`)."""
        recipe = self.recipe_fields(recipe or {})
        names = {f.name for f in dataclasses.fields(self)}
        unknown = [name for name in task_defaults or {} if name not in names]
        if unknown:
            raise ValueError(f"task_defaults: {unknown[0]!r} is not a field of {type(self).__name__}")
        optim = self.optim or recipe.get("optim") or FALLBACKS["optim"]
        if recipe.get("optim", optim) != optim:
            recipe = {k: v for k, v in recipe.items() if k not in OPTIMIZER_BOUND}
        if self.lr_scheduler_type is not None and recipe.get("lr_scheduler_type", self.lr_scheduler_type) != \
                self.lr_scheduler_type:  # the recipe's schedule options belong to its schedule
            recipe.pop("lr_scheduler_kwargs", None)
        filled = {}
        for source in (recipe, task_defaults or {}, FALLBACKS, {"learning_rate": DEFAULT_LEARNING_RATES[optim]}):
            for name, value in source.items():
                if name in names and getattr(self, name) is None and name not in filled:
                    filled[name] = value
        if filled.get("bf16"):  # a recipe's bf16, never an explicit --bf16: only where the device runs it faster
            filled["bf16"] = recipe_bf16_applies(self.use_cpu)
        if filled.get("torch_compile"):  # likewise a recipe's torch_compile: only on a GPU
            filled["torch_compile"] = gpu_recipe_setting_applies(self.use_cpu, "torch_compile")
        if filled.get("bf16_weights"):  # and its bf16 weights: on a GPU, with the run's bf16
            bf16 = filled.get("bf16", self.bf16)
            filled["bf16_weights"] = bool(bf16) and gpu_recipe_setting_applies(self.use_cpu, "bf16_weights")
        return dataclasses.replace(self, **filled)

    def recipe_fields(self, recipe: dict[str, Any]) -> dict[str, Any]:
        """``recipe`` (keyed by :data:`hf_seqmodels.recipes.RECIPE_KEYS`) as values of this task's fields.

        The schedule's options (``decay_start_epoch``, ``decay_factor``, ``min_lr_ratio``) become
        ``lr_scheduler_kwargs``. A task key (:data:`hf_seqmodels.recipes.TASK_KEYS`: ``bptt``, ``shuffle_windows``)
        fills its field where this task has it (``bptt`` is the LM's ``block_size``) and is left out where it has
        not: it describes another task's data (a family's recipe serves all its heads, e.g. the recurrent family's
        LM recipe its classifiers, unless a head has a recipe of its own). Any other key must be a field of this
        task: a key unknown to every task (a misspelt one) is a ValueError naming it, never dropped in silence."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = [key for key in recipe if key not in names and key not in RECIPE_KEYS]
        if unknown:
            raise ValueError(f"The training recipe's {unknown[0]!r} is neither a recipe key ({', '.join(RECIPE_KEYS)}) "
                             f"nor another field of {type(self).__name__}.")
        fields = {key: value for key, value in recipe.items() if key not in TASK_KEYS and key not in SCHEDULE_OPTIONS}
        for key, value in recipe.items():
            if key in TASK_KEYS and TASK_KEYS[key] in names:
                fields.setdefault(TASK_KEYS[key], value)
        if any(key in recipe for key in SCHEDULE_OPTIONS):
            fields["lr_scheduler_kwargs"] = json.dumps(schedule_options(recipe))
        return fields

    def filled(self, task_defaults: dict[str, Any] | None = None) -> EngineArguments:
        """These arguments when nothing is left to fill (:meth:`unfilled`: a command line filled them with its
        recipe), else :meth:`with_recipe` with the task's defaults (arguments a Python caller built). The ``train_*``
        functions start here."""
        return self if not self.unfilled(task_defaults) else self.with_recipe(task_defaults=task_defaults)

    def unfilled(self, task_defaults: dict[str, Any] | None = None) -> list[str]:
        """The fields :meth:`with_recipe` fills that are still unset (those of :data:`FALLBACKS`, the learning rate
        and ``task_defaults``): empty for arguments a run can use."""
        return [name for name in dict.fromkeys((*FALLBACKS, "learning_rate", *(task_defaults or {})))
                if getattr(self, name) is None]

    def to_dict(self) -> dict[str, Any]:
        """The arguments as a plain dict, as the run records them and gives them to the experiment trackers."""
        return dataclasses.asdict(self)


__all__ = ["EngineArguments", "FALLBACKS", "STRATEGIES", "TRACKERS"]
