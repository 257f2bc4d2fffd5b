"""The vocabulary of training recipes, in one place: optimizers, schedules and their options, the keys a recipe
may hold, and the checks of a recipe.

A recipe (:meth:`hf_seqmodels.families.Family.training_recipe`) is keyed by the training arguments' names
(``--optim``, ``--learning_rate``, ``--lr_scheduler_type``, ...: transformers' ``TrainingArguments`` names), plus
the options of its schedule at the top level (``decay_start_epoch``, ``decay_factor``, ``min_lr_ratio``) and the
keys of a task's data layout (:data:`TASK_KEYS`: ``bptt``, ``shuffle_windows``). The registry's recipes, the
training arguments (``training.core.arguments``), the schedules (``training.core.schedules``) and the
``presets`` listing all read the names from here, so an optimizer or a schedule is added in one place.

This module imports nothing of the package: the model registry and the training engine both stand on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: the optimizers (``optim``, transformers' names)
OPTIMIZERS = ("sgd", "adamw_torch", "adamw_torch_fused")
#: the learning rate of each optimizer when neither the command line nor a recipe for that optimizer gives one
#: (transformers' 5e-5 suits fine-tuning a pretrained model, not training one from scratch)
DEFAULT_LEARNING_RATES = {"sgd": 1.0, "adamw_torch": 1e-3, "adamw_torch_fused": 1e-3}
#: plausible peak learning rates per optimizer (noam: the peak its factor reaches, see :func:`peak_learning_rate`)
LEARNING_RATE_RANGES = {"sgd": (1e-3, 50.0), "adamw_torch": (1e-6, 1e-2), "adamw_torch_fused": (1e-6, 1e-2)}
#: the Adam constants, which SGD does not take
ADAM_KEYS = ("adam_beta1", "adam_beta2", "adam_epsilon")

#: the learning-rate schedules (``lr_scheduler_type``), each with the options it takes (``lr_scheduler_kwargs``,
#: or top-level keys of a recipe): transformers' ``linear``, ``cosine`` (down to ``min_lr_ratio``) and
#: ``constant``, and ours, ``zaremba`` (constant, then times ``decay_factor`` each epoch from ``decay_start_epoch``
#: on) and ``noam`` (Vaswani et al. 2017: ``learning_rate * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)``)
SCHEDULE_KWARGS: dict[str, tuple[str, ...]] = {
    "linear": (), "cosine": ("min_lr_ratio",), "constant": (), "zaremba": ("decay_start_epoch", "decay_factor"),
    "noam": (),
}
SCHEDULES = tuple(SCHEDULE_KWARGS)
#: every schedule option a recipe may give at its top level
SCHEDULE_OPTIONS = tuple(dict.fromkeys(option for options in SCHEDULE_KWARGS.values() for option in options))
#: schedules whose recipes state every option: their defaults (Zaremba's small model's) fit no other paper
STATED_OPTIONS = ("zaremba",)

#: recipe keys of a task's data, with the training-arguments field each fills: the LM's training window (``bptt``,
#: as the papers name it: ``--block_size``) and window order. They apply where the task's arguments have that field
#: (the LM's); elsewhere, e.g. a recurrent family's recipe reaching its classifier, they are left out.
TASK_KEYS = {"bptt": "block_size", "shuffle_windows": "shuffle_windows"}
#: every key a recipe may hold, in the order a recipe lists them
RECIPE_KEYS = ("optim", "learning_rate", *ADAM_KEYS, "lr_scheduler_type", "lr_scheduler_kwargs", *SCHEDULE_OPTIONS,
               "warmup_steps", "weight_decay", "max_grad_norm", "per_device_train_batch_size",
               "gradient_accumulation_steps", "bptt", "num_train_epochs", "max_steps", "bf16", "bf16_weights",
               "torch_compile", "shuffle_windows")
#: the recipe keys that are fields of every task's training arguments: what a paper fixes about the optimisation,
#: the precision and compilation
TRAINING_KEYS = tuple(key for key in RECIPE_KEYS if key not in SCHEDULE_OPTIONS and key not in TASK_KEYS)
#: recipe values that only hold with the recipe's own optimizer
OPTIMIZER_BOUND = ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", *SCHEDULE_OPTIONS, "warmup_steps",
                   *ADAM_KEYS, "weight_decay")


def schedule_options(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The schedule options of ``recipe``: those of its ``lr_scheduler_kwargs`` (a dict, or JSON text), then its
    top-level ones (:data:`SCHEDULE_OPTIONS`)."""
    kwargs = recipe.get("lr_scheduler_kwargs") or {}
    options = dict(json.loads(kwargs) if isinstance(kwargs, str) else kwargs)
    options.update({key: recipe[key] for key in SCHEDULE_OPTIONS if key in recipe})
    return options


def merge_recipes(base: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``entry`` (a new dict, keys in the order of :data:`RECIPE_KEYS`); keys of ``base`` that
    only mean something for an optimizer or schedule that ``entry`` replaces (``adam_*`` when it switches to SGD,
    the old schedule's options when it changes the schedule) go."""
    merged = dict(base)
    if entry.get("optim", merged.get("optim")) == "sgd":
        for key in ADAM_KEYS:
            merged.pop(key, None)
    if entry.get("lr_scheduler_type", merged.get("lr_scheduler_type")) != merged.get("lr_scheduler_type"):
        for key in (*SCHEDULE_KWARGS.get(merged.get("lr_scheduler_type"), ()), "lr_scheduler_kwargs"):
            merged.pop(key, None)
    merged.update(entry)
    rank = {key: i for i, key in enumerate(RECIPE_KEYS)}
    return dict(sorted(merged.items(), key=lambda item: rank.get(item[0], len(rank))))


def peak_learning_rate(recipe: Mapping[str, Any], d_model: int | None = None) -> float:
    """The largest learning rate the recipe's schedule reaches: ``learning_rate``, except for ``noam``, where
    ``learning_rate`` scales ``d_model^-0.5 * warmup_steps^-0.5`` (reached at the end of the warm-up)."""
    learning_rate = float(recipe.get("learning_rate", 5e-5))
    if recipe.get("lr_scheduler_type") != "noam":
        return learning_rate
    if d_model is None:
        raise ValueError("peak_learning_rate: the noam schedule needs d_model (the model width)")
    return learning_rate * d_model**-0.5 * max(recipe.get("warmup_steps", 1), 1) ** -0.5


def recipe_problems(recipe: Mapping[str, Any], d_model: int | None = None) -> list[str]:
    """What is wrong with ``recipe`` (empty when nothing): keys outside :data:`RECIPE_KEYS`, unknown optimizers
    or schedules, a peak learning rate outside what its optimizer trains with, keys of another optimizer or
    schedule, out-of-range values."""
    problems = [f"{key!r} is not a recipe key; recipe keys: {', '.join(RECIPE_KEYS)}"
                for key in recipe if key not in RECIPE_KEYS]
    optim, schedule = recipe.get("optim"), recipe.get("lr_scheduler_type")
    if optim not in OPTIMIZERS:
        problems.append(f"optim={optim!r}: expected one of {OPTIMIZERS}")
    if schedule not in SCHEDULES:
        problems.append(f"lr_scheduler_type={schedule!r}: expected one of {SCHEDULES}")
    if optim in LEARNING_RATE_RANGES and (schedule != "noam" or d_model is not None):
        low, high = LEARNING_RATE_RANGES[optim]
        peak = peak_learning_rate(recipe, d_model)
        if not low <= peak <= high:
            problems.append(f"peak learning rate {peak:g} with optim={optim!r}: expected {low:g} to {high:g}")
    if optim == "sgd":
        problems += [f"{key!r} is an Adam setting, but optim='sgd'" for key in ADAM_KEYS if key in recipe]
    options = schedule_options(recipe)
    for key in options:
        owners = [name for name, keys in SCHEDULE_KWARGS.items() if key in keys]
        if not owners:
            problems.append(f"{key!r} is no schedule's option; options: {', '.join(SCHEDULE_OPTIONS)}")
        elif schedule not in owners:
            problems.append(f"{key!r} belongs to the {' or '.join(map(repr, owners))} schedule, not {schedule!r}")
    if schedule in STATED_OPTIONS:
        problems += [f"lr_scheduler_type={schedule!r} needs {key!r}" for key in SCHEDULE_KWARGS[schedule]
                     if key not in options]
    if schedule == "noam" and not recipe.get("warmup_steps", 0) >= 1:
        problems.append("lr_scheduler_type='noam' needs warmup_steps >= 1")
    if not 0 < options.get("decay_factor", 1.0) <= 1:
        problems.append(f"decay_factor={options['decay_factor']!r}: expected a factor in (0, 1]")
    if not 0 <= options.get("min_lr_ratio", 0.0) <= 1:
        problems.append(f"min_lr_ratio={options['min_lr_ratio']!r}: expected a ratio in [0, 1]")
    for key in ("per_device_train_batch_size", "bptt", "gradient_accumulation_steps"):
        if key in recipe and (not isinstance(recipe[key], int) or recipe[key] < 1):
            problems.append(f"{key}={recipe[key]!r}: expected an integer >= 1")
    for key in ("weight_decay", "max_grad_norm", "warmup_steps", "num_train_epochs"):
        if key in recipe and not recipe[key] >= 0:
            problems.append(f"{key}={recipe[key]!r}: expected a number >= 0")
    return problems


__all__ = ["ADAM_KEYS", "DEFAULT_LEARNING_RATES", "LEARNING_RATE_RANGES", "OPTIMIZERS", "OPTIMIZER_BOUND",
           "RECIPE_KEYS", "SCHEDULES", "SCHEDULE_KWARGS", "SCHEDULE_OPTIONS", "STATED_OPTIONS", "TASK_KEYS",
           "TRAINING_KEYS", "merge_recipes", "peak_learning_rate", "recipe_problems", "schedule_options"]
