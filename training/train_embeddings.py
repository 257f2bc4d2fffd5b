#!/usr/bin/env python
"""Train word embeddings (word2vec CBOW/skip-gram, GloVe, or the count-based SVD baseline) on text files.

The logic lives in :mod:`hf_seqmodels.training.classic.embeddings_cli`; ``--help`` lists every option. Example::

    python training/train_embeddings.py --train_file corpus.txt --method word2vec --architecture skipgram \
        --loss negative_sampling --output_dir runs/w2v --analogies_file benchmarks/data/analogies.txt
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.classic.embeddings_cli import main  # noqa: E402
from hf_seqmodels.training.core.cli import run_command  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
