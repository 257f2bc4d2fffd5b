#!/usr/bin/env python
"""Train an NNLM or RNN/LSTM/GRU language model with truncated BPTT.

The logic lives in :mod:`hf_seqmodels.training.lm.cli`; ``--help`` lists every option. Examples::

    python training/train_lm.py --train_file hf_seqmodels/data/tiny_shakespeare.txt --tokenizer_kind char \
        --model_family rnn --preset char-rnn --output_dir runs/char-lstm
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 training/train_lm.py ...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.core.cli import run_command  # noqa: E402
from hf_seqmodels.training.lm.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
