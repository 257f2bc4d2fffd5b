"""BERT pretraining with masked LM and next-sentence prediction (``training/pretrain_bert.py``)."""
