"""Sequence-to-sequence training: teacher forcing, length-bucketed batches, BLEU (``training/train_seq2seq.py``)."""
