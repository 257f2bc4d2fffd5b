#!/usr/bin/env python
"""Fit an n-gram language model (add-k or interpolated Kneser–Ney) and report validation perplexity.

The logic lives in :mod:`hf_seqmodels.training.classic.ngram_cli`; ``--help`` lists every option. Example::

    python training/train_ngram.py --train_file hf_seqmodels/data/tiny_shakespeare.txt --tokenizer_kind char \
        --order 5 --smoothing kneser_ney --output_dir runs/char-5gram
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.classic.ngram_cli import main  # noqa: E402
from hf_seqmodels.training.core.cli import run_command  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
