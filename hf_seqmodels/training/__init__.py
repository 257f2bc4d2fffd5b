"""Training: one engine (:mod:`.engine`) and a task on top of it for each kind of model.

* :mod:`.engine` – :class:`EngineArguments` and :class:`TrainingLoop`: accelerate, optimizer and
  schedule, logging, time cap, atomic checkpoints that resume exactly, curves, the final save;
* :mod:`.lm_trainer` – causal language modelling with TBPTT (:func:`train_causal_lm`);
* :mod:`.data` – text loading, one token stream, TBPTT windows;
* :mod:`.schedules` – Zaremba decay, warmup + cosine, Noam, constant (``LambdaLR`` factors);
* :mod:`.checkpointing` – the checkpoint format, loaded with ``weights_only=True``;
* :mod:`.plotting` – ``training_history.json`` and ``loss_curve.png``;
* :mod:`.lm_cli` – the command line behind ``training/train_lm.py``;
* :mod:`.finetune` – downstream tasks with transformers' ``Trainer`` (``training/finetune.py``), with
  their data in :mod:`.classification_data`, :mod:`.token_classification_data` and :mod:`.qa_data`.
"""

from .engine import EngineArguments, TrainingLoop
from .lm_trainer import LMTrainingArguments, evaluate_causal_lm, train_causal_lm
from .qa_data import postprocess_predictions, prepare_eval_features, prepare_train_features, read_squad_json
from .token_classification_data import label_list, predictions_to_tags, read_conll, tokenize_and_align_labels

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
