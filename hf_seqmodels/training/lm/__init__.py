"""Causal language modelling with truncated BPTT over token streams (``training/train_lm.py``)."""
