"""The optimizer ``--optim`` names, over a model's trainable parameters, and the width the Noam schedule reads."""

from __future__ import annotations

import re
from typing import Any

import torch

from .arguments import EngineArguments
from .master_weights import MasterWeights

#: parameter names that never decay, as transformers' ``Trainer.get_decay_parameter_names`` has them: biases
#: and normalisation weights (matched in the lower-cased dotted name)
NO_DECAY_PATTERNS = tuple(re.compile(p) for p in (r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)",
                                                  r"_norm(?:$|\.)"))
#: modules whose parameters never decay, whatever their names
NO_DECAY_MODULES = (torch.nn.LayerNorm,)


def decay_parameter_names(model: torch.nn.Module) -> list[str]:
    """The names (as ``named_parameters`` gives them) of the parameters weight decay applies to: transformers'
    Trainer rule, all but biases and the weights of LayerNorm modules or of modules named like a norm
    (``layernorm``, ``rmsnorm``, ``norm``, ``*_norm``). Embeddings and output layers decay, as there."""
    exempt = {id(p) for module in model.modules() if isinstance(module, NO_DECAY_MODULES)
              for p in module.parameters()}
    return [name for name, p in model.named_parameters()
            if id(p) not in exempt and not any(pattern.search(name.lower()) for pattern in NO_DECAY_PATTERNS)]


def parameter_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The trainable parameters as two optimizer groups, as transformers' Trainer makes them: the decayed
    parameters (:func:`decay_parameter_names`) at ``weight_decay`` and the others at 0. Always the same two
    groups (one may be empty), whatever ``weight_decay`` is, so that a run resumed with another value loads
    the saved optimizer state."""
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    decayed = set(decay_parameter_names(model))
    return [{"params": [p for name, p in trainable if name in decayed], "weight_decay": weight_decay or 0.0},
            {"params": [p for name, p in trainable if name not in decayed], "weight_decay": 0.0}]


#: what a resumed run takes from the saved optimizer groups: the learning rate, which the resumed schedule drives
SCHEDULED_SETTINGS = ("params", "lr", "initial_lr")


def group_settings(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """The hyperparameters of each optimizer group that are not scheduled (weight decay, betas, epsilon...)."""
    return [{k: v for k, v in group.items() if k not in SCHEDULED_SETTINGS} for group in optimizer.param_groups]


def restore_group_settings(optimizer: torch.optim.Optimizer, settings: list[dict[str, Any]]) -> None:
    """Put back :func:`group_settings` after loading a checkpoint's optimizer state, which carries the settings
    the run was started with: a run resumed with another ``--weight_decay`` or Adam constant (the run warns
    about each change) trains with the new values, its moments and step counts kept."""
    for group, values in zip(optimizer.param_groups, settings, strict=True):
        group.update(values)


def build_optimizer(model: torch.nn.Module, args: EngineArguments,
                    master_weights: MasterWeights | None = None) -> torch.optim.Optimizer:
    """``--optim``: plain SGD (Zaremba et al.) or AdamW (``adamw_torch_fused``: torch's fused kernel where the
    device has one) over the trainable parameters, ``weight_decay`` on all but biases and normalisation
    weights (:func:`parameter_groups`). With ``master_weights`` (``--bf16_weights``) it updates their float32
    copies of the parameters, and writes them back into the model after each step."""
    groups = parameter_groups(model, args.weight_decay)
    if master_weights is not None:
        return master_weights.attach(_optimizer(master_weights.optimizer_groups(groups), args))
    return _optimizer(groups, args)


def _optimizer(groups: list[dict[str, Any]], args: EngineArguments) -> torch.optim.Optimizer:
    if args.optim == "sgd":
        return torch.optim.SGD(groups, lr=args.learning_rate)
    fused = args.optim == "adamw_torch_fused" and all(
        p.device.type in ("cuda", "cpu", "mps") for group in groups for p in group["params"])
    return torch.optim.AdamW(groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_epsilon, **({"fused": True} if fused else {}))


def model_width(model: torch.nn.Module) -> int | None:
    """``d_model`` of the Noam schedule: the config's ``d_model`` or ``hidden_size``."""
    config = getattr(model, "config", None)
    return getattr(config, "d_model", None) or getattr(config, "hidden_size", None)


__all__ = ["NO_DECAY_PATTERNS", "build_optimizer", "decay_parameter_names", "group_settings", "model_width",
           "parameter_groups", "restore_group_settings"]
