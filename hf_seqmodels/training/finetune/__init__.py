"""Fine-tuning on downstream tasks: sequence classification, token classification and extractive QA
(``training/finetune.py``), with each task's data reading and encoding."""

from .cli import (
    FinetuneDataArguments,
    FinetuneModelArguments,
    build_model,
    build_parser,
    load_tokenizer,
    main,
)

__all__ = ["FinetuneDataArguments", "FinetuneModelArguments", "build_model", "build_parser", "load_tokenizer", "main"]
