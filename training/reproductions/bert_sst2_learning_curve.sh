#!/usr/bin/env bash
# Where does the small pretraining of bert_wikitext2_sst2.sh pay? SST-2 fine-tuning on the first N training
# sentences (3 epochs, otherwise the flags of that script), from the pretrained bert-mini and from random
# initialisation with the same tokenizer, for each N and seed; prints dev accuracy. Run after
# bert_wikitext2_sst2.sh (it reads runs/bert-mini-wikitext2). The two runs of a pair go side by side,
# one thread each.
#
#   bash training/reproductions/bert_sst2_learning_curve.sh [path/to/shared/data] [sizes] [seeds]
#   bash training/reproductions/bert_sst2_learning_curve.sh ../shared/data "500 2000 8000" "42 43"
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
DATA=${1:-../shared/data}
SIZES=${2:-"500 2000 8000"}
SEEDS=${3:-"42 43"}
OUT=runs/sst2-learning-curve
mkdir -p "$OUT"
for N in $SIZES; do
  for SEED in $SEEDS; do
    SST2=(--task sequence-classification --train_file "$DATA/sst2/train.tsv" --validation_file "$DATA/sst2/dev.tsv"
          --max_train_samples "$N" --max_seq_length 64 --per_device_train_batch_size 32
          --per_device_eval_batch_size 128 --learning_rate 1e-4 --warmup_steps 0.06 --weight_decay 0.01
          --num_train_epochs 3 --eval_strategy no --save_strategy no --logging_steps 50 --report_to none
          --use_cpu --seed "$SEED" --disable_tqdm true)
    finetune_pair runs/bert-mini-wikitext2 "$OUT/{run}-n$N-seed$SEED" "n=$N seed $SEED" "${SST2[@]}"
  done
done
