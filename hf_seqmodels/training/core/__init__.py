"""What every training run shares: arguments, the loop, checkpoints, signals, launch, cards and plots, text."""
