"""What a finished run writes about itself: generation defaults, the hardware line and the model card."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

import torch
from accelerate import PartialState
from accelerate.logging import get_logger
from accelerate.state import is_initialized

if TYPE_CHECKING:
    from .arguments import EngineArguments

logger = get_logger(__name__)


def configure_generation(model: torch.nn.Module, tokenizer, max_new_tokens: int) -> None:
    """Sensible ``generation_config`` defaults: the tokenizer's bos/eos/pad ids and ``max_new_tokens``, which an
    encoder-decoder with a position limit (``max_position_embeddings``) caps so its decoder stays inside it."""
    generation_config = model.generation_config
    positions = getattr(model.config, "max_position_embeddings", None)
    if model.config.is_encoder_decoder and positions is not None and max_new_tokens >= positions:
        logger.warning(f"generation_max_length={max_new_tokens} would take the decoder past "
                       f"max_position_embeddings={positions}: generating at most {positions - 1} tokens.")
        max_new_tokens = positions - 1  # after decoder_start_token_id
    generation_config.max_new_tokens = max_new_tokens
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None) if tokenizer is not None else None
        if value is None:
            value = getattr(model.config, name, None)
        setattr(generation_config, name, value)


def describe_hardware(num_processes: int = 1) -> str:
    """What trained the model, for its card: ``"2 processes on CPU (x86_64, 1 torch thread each)"`` or
    ``"8 processes on NVIDIA H100 80GB HBM3"``."""
    device = PartialState().device if is_initialized() else torch.device("cpu")  # a run's, never a new state
    processes = f"{num_processes} process{'es' if num_processes > 1 else ''}"
    if device.type == "cuda":
        return f"{processes} on {torch.cuda.get_device_name(device)}"
    if device.type != "cpu":
        return f"{processes} on {device.type}"
    threads = torch.get_num_threads()
    return f"{processes} on CPU ({platform.machine()}, {threads} torch thread{'s' if threads > 1 else ''} each)"


def engine_card_arguments(args: EngineArguments, num_processes: int = 1) -> dict[str, Any]:
    """The hyper-parameters every model card lists under "Training procedure"."""
    schedule = f"{args.lr_scheduler_type}, {args.warmup_steps:g} warm-up steps"
    options = args.scheduler_kwargs
    if args.lr_scheduler_type == "zaremba":
        schedule += (f", x{options.get('decay_factor', 0.5)} per epoch after epoch "
                     f"{options.get('decay_start_epoch', 4)}")
    elif options:
        schedule += ", " + ", ".join(f"{k} {v}" for k, v in options.items())
    optimizer = f"{args.optim} (weight decay {args.weight_decay})"
    if args.optim != "sgd":
        optimizer += f", betas ({args.adam_beta1}, {args.adam_beta2}), eps {args.adam_epsilon:g}"
    extras = {"gradient accumulation (batches per update)": args.gradient_accumulation_steps
              if args.gradient_accumulation_steps > 1 else None,
              "activation checkpointing": args.gradient_checkpointing or None,
              "bf16 weights (float32 master copy)": args.bf16_weights or None,
              "torch.compile": args.torch_compile or None}
    return {
        "optimizer": optimizer,
        "learning rate": args.learning_rate,
        "schedule": schedule,
        "gradient clipping (max norm)": args.clip_norm,
        "epochs (max)": args.num_train_epochs,
        "time cap (minutes)": args.max_time_minutes,
        "hardware": describe_hardware(num_processes),
        "mixed precision": args.mixed_precision,
        "seed": args.seed,
        **{k: v for k, v in extras.items() if v},
    }


def write_run_model_card(output_dir: str, model, tokenizer, results: dict[str, Any], hyper_parameters: dict[str, Any],
                         training_data: str | None = None, **card_kwargs) -> None:
    """The model card of a training run: results, hyper-parameters, data and loss curve."""
    from ...cards import summarize_results, write_model_card

    write_model_card(output_dir, model, tokenizer, summarize_results(results), training_args=hyper_parameters,
                     training_data=training_data or "Not recorded.", **card_kwargs)


__all__ = ["configure_generation", "describe_hardware", "engine_card_arguments", "write_run_model_card"]
