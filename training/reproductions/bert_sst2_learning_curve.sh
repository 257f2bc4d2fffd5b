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
    sst2_flags "$DATA" 1e-4 3 "$SEED"
    finetune_pair runs/bert-mini-wikitext2 pretrained "$OUT/{run}-n$N-seed$SEED" "n=$N seed $SEED" "${SST2[@]}" \
        --max_train_samples "$N" --eval_strategy no --logging_steps 50
  done
done
