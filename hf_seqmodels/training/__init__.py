"""Training engines. ``lm_trainer`` trains the stateful causal LMs (RNN/LSTM/GRU, NNLM) with TBPTT.

* :mod:`.data` – text loading, one token stream, TBPTT windows;
* :mod:`.schedules` – Zaremba decay, warmup + cosine, constant (``LambdaLR`` factors);
* :mod:`.checkpointing` – atomic checkpoints that resume exactly, loaded with ``weights_only=True``;
* :mod:`.lm_trainer` – :class:`LMTrainingArguments` and :func:`train_causal_lm` (``accelerate``);
* :mod:`.plotting` – ``training_history.json`` and ``loss_curve.png``;
* :mod:`.lm_cli` – the command line behind ``training/train_lm.py``.
"""

from .lm_trainer import LMTrainingArguments, evaluate_causal_lm, train_causal_lm

__all__ = ["LMTrainingArguments", "evaluate_causal_lm", "train_causal_lm"]
