"""Fine-tuning on downstream tasks: sequence classification, token classification and extractive QA
(``training/finetune.py``) on the package's training loop, with each task's data reading and encoding."""

from .cli import (
    DataArguments,
    FinetuneDataArguments,
    FinetuneModelArguments,
    ModelArguments,
    build_model,
    load_tokenizer,
    main,
)
from .trainer import FinetuneTrainingArguments, FinetuneTrainingLoop

__all__ = ["DataArguments", "FinetuneDataArguments", "FinetuneModelArguments", "FinetuneTrainingArguments",
           "FinetuneTrainingLoop", "ModelArguments", "build_model", "load_tokenizer", "main"]
