"""Training: one loop (:mod:`.core`) and one sub-package per task that plugs into it.

* :mod:`.core` – what every run shares: the arguments, the loop (:class:`TrainingLoop`: accelerate,
  optimizer and schedule, logging, evaluation, the time cap), atomic checkpoints that resume exactly,
  stop signals, the launch (DDP, FSDP2, DeepSpeed from ``accelerate launch`` configs), model cards and
  plots, text loading, the token-file cache and the command-line plumbing;
* :mod:`.lm` – causal language modelling with truncated BPTT (``training/train_lm.py``);
* :mod:`.seq2seq` – encoder-decoders with teacher forcing and BLEU (``training/train_seq2seq.py``);
* :mod:`.bert` – BERT pretraining, masked LM + next-sentence prediction (``training/pretrain_bert.py``);
* :mod:`.finetune` – classification, tagging and extractive QA (``training/finetune.py``);
* :mod:`.classic` – the n-gram LM and word embeddings, which are counted or trained by their own code.
"""

import importlib
from typing import Any

from .core.arguments import EngineArguments
from .core.loop import TrainingLoop
from .lm.trainer import LMTrainingArguments, evaluate_causal_lm, train_causal_lm

#: the fine-tuning helpers, imported on first use: they pull in ``datasets`` and ``evaluate``, which a language-model
#: or translation run (one per rank) would otherwise hold in memory without using them
_LAZY = {
    **dict.fromkeys(("postprocess_predictions", "prepare_eval_features", "prepare_train_features", "read_squad_json"),
                    ".finetune.qa_data"),
    **dict.fromkeys(("label_list", "predictions_to_tags", "read_conll", "tokenize_and_align_labels"),
                    ".finetune.token_classification_data"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "EngineArguments",
    "LMTrainingArguments",
    "TrainingLoop",
    "evaluate_causal_lm",
    "label_list",
    "postprocess_predictions",
    "predictions_to_tags",
    "prepare_eval_features",
    "prepare_train_features",
    "read_conll",
    "read_squad_json",
    "tokenize_and_align_labels",
    "train_causal_lm",
]
