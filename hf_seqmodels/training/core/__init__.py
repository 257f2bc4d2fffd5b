"""What every training run shares: arguments, the loop, checkpoints, signals, launch, cards and plots, text and the
token-file cache (each task's own corpus lives in its sub-package: ``lm``, ``seq2seq``, ``bert``)."""
