#!/usr/bin/env bash
# Task-adaptive pretraining (Gururangan et al. 2020, "Don't Stop Pretraining"): the bert-mini pretrained on
# WikiText-2 by bert_wikitext2_sst2.sh continues masked-LM + next-sentence pretraining on the *text* of the
# SST-2 training set (its 67,349 phrases without their labels; the dev set is never read), then is fine-tuned
# on SST-2 with the flags of bert_wikitext2_sst2.sh. The run from random initialisation is the same as there
# (same tokenizer, flags and seed), so an existing one is reused.
# SST-2's phrases have no document order: they are grouped 20 to a pseudo-document, so "IsNext" pairs are
# neighbouring phrases; next-sentence prediction stays in the objective but has little to learn there.
#
#   bash training/reproductions/bert_wikitext2_sst2_tapt.sh [path/to/shared/data] [fine-tuning epochs] [seeds] [learning rate]
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
sst2_arguments "$@"
if [ ! -f runs/bert-mini-wikitext2/model.safetensors ]; then
  echo "runs/bert-mini-wikitext2 is missing: run training/reproductions/bert_wikitext2_sst2.sh first" >&2
  exit 1
fi
TAPT=runs/bert-mini-wikitext2-sst2text
if [ ! -f $TAPT/model.safetensors ]; then
  python - "$DATA/sst2/train.tsv" runs/sst2-train-text.txt <<'PY'
import csv, sys
with open(sys.argv[1], newline="") as tsv, open(sys.argv[2], "w") as out:
    for i, row in enumerate(csv.DictReader(tsv, delimiter="\t", quoting=csv.QUOTE_NONE)):
        out.write(row["sentence"].strip() + "\n" + ("\n" if i % 20 == 19 else ""))
PY
  OMP_NUM_THREADS=2 python training/pretrain_bert.py --model_name_or_path runs/bert-mini-wikitext2 \
      --tokenizer_name_or_path runs/bert-mini-wikitext2 --train_file runs/sst2-train-text.txt \
      --max_seq_length 64 --per_device_train_batch_size 32 --num_train_epochs 100 --max_steps 4000 --max_train_minutes 30 \
      --optimizer adamw --learning_rate 5e-4 --adam_beta2 0.98 --adam_epsilon 1e-6 --weight_decay 0.01 \
      --lr_scheduler cosine --warmup_steps 200 --checkpointing_steps 500 --logging_steps 100 --disable_tqdm \
      --dataset_label sst2 --output_dir $TAPT > $TAPT.log 2>&1
fi

finetune_seeds $TAPT tapt
