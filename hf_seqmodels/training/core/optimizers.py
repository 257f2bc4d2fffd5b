"""The optimizer ``--optim`` names, over a model's trainable parameters, and the width the Noam schedule reads."""

from __future__ import annotations

import torch

from .arguments import EngineArguments


def build_optimizer(model: torch.nn.Module, args: EngineArguments) -> torch.optim.Optimizer:
    """``--optim``: plain SGD (Zaremba et al.) or AdamW (``adamw_torch_fused``: torch's fused kernel where the
    device has one) over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if args.optim == "sgd":
        return torch.optim.SGD(params, lr=args.learning_rate, weight_decay=args.weight_decay)
    fused = args.optim == "adamw_torch_fused" and all(p.device.type in ("cuda", "cpu", "mps") for p in params)
    return torch.optim.AdamW(params, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_epsilon, weight_decay=args.weight_decay, **({"fused": True} if fused else {}))


def model_width(model: torch.nn.Module) -> int | None:
    """``d_model`` of the Noam schedule: the config's ``d_model`` or ``hidden_size``."""
    config = getattr(model, "config", None)
    return getattr(config, "d_model", None) or getattr(config, "hidden_size", None)


__all__ = ["build_optimizer", "model_width"]
