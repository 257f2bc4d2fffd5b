#!/usr/bin/env python
"""Pretrain BERT (masked LM + next-sentence prediction) on plain text.

The logic lives in :mod:`hf_seqmodels.training.bert.cli`; ``--help`` lists every option. Example::

    python training/pretrain_bert.py --train_file ../shared/data/wikitext2-heldout/valid.txt \
        --preset bert-mini --output_dir runs/bert-mini
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 training/pretrain_bert.py ...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.bert.cli import main  # noqa: E402
from hf_seqmodels.training.core.cli import run_command  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
