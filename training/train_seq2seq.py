#!/usr/bin/env python
"""Train an attention RNN encoder-decoder or a Transformer on a parallel corpus, report sacreBLEU.

The logic lives in :mod:`hf_seqmodels.training.seq2seq.cli`; ``--help`` lists every option. Example::

    python training/train_seq2seq.py \
        --train_source_file ../shared/data/multi30k/train.en.gz --train_target_file ../shared/data/multi30k/train.de.gz \
        --validation_source_file ../shared/data/multi30k/val.en.gz --validation_target_file ../shared/data/multi30k/val.de.gz \
        --model_family rnn_seq2seq --preset rnnsearch --output_dir runs/rnnsearch
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 training/train_seq2seq.py ...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.core.cli import run_command  # noqa: E402
from hf_seqmodels.training.seq2seq.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
