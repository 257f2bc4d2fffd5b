#!/usr/bin/env python
"""Fine-tune a model on a downstream task (classification, tagging, extractive QA) on the package's training loop.

The logic lives in :mod:`hf_seqmodels.training.finetune.cli`; ``--help`` lists every option (the
``TrainingArguments`` names: checkpoints, ``--resume_from_checkpoint latest``, stop signals). Examples::

    # SST-2 sentiment from a BERT pretrained with training/pretrain_bert.py
    python training/finetune.py --task sequence-classification --model_name_or_path runs/bert-mini \
        --train_file ../shared/data/sst2/train.tsv --validation_file ../shared/data/sst2/dev.tsv \
        --max_seq_length 64 --learning_rate 1e-4 --num_train_epochs 2 --output_dir runs/sst2

    # the same model from random initialisation (same tokenizer), the baseline
    python training/finetune.py --task sequence-classification --preset bert-mini \
        --tokenizer_name runs/bert-mini ... --output_dir runs/sst2-scratch

    # named entities (CoNLL columns) and extractive QA (SQuAD JSON)
    python training/finetune.py --task token-classification --train_file train.conll --validation_file dev.conll ...
    python training/finetune.py --task question-answering --train_file train.json --validation_file dev.json ...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from hf_seqmodels.training.core.cli import run_command  # noqa: E402
from hf_seqmodels.training.finetune.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command(main))
