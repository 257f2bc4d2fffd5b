"""Training: one engine (:mod:`.engine`) and a task on top of it for each kind of model.

* :mod:`.engine` – :class:`EngineArguments` and :class:`TrainingLoop`: accelerate, optimizer and
  schedule, logging, time cap, atomic checkpoints that resume exactly, curves, the final save;
* :mod:`.lm_trainer` – causal language modelling with TBPTT (:func:`train_causal_lm`);
* :mod:`.data` – text loading, one token stream, TBPTT windows;
* :mod:`.schedules` – Zaremba decay, warmup + cosine, Noam, constant (``LambdaLR`` factors);
* :mod:`.checkpointing` – the checkpoint format, loaded with ``weights_only=True``;
* :mod:`.plotting` – ``training_history.json`` and ``loss_curve.png``;
* :mod:`.lm_cli` – the command line behind ``training/train_lm.py``.
"""

from .engine import EngineArguments, TrainingLoop
from .lm_trainer import LMTrainingArguments, evaluate_causal_lm, train_causal_lm

__all__ = ["EngineArguments", "LMTrainingArguments", "TrainingLoop", "evaluate_causal_lm", "train_causal_lm"]
