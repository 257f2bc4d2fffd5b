#!/usr/bin/env bash
# Where does pretraining pay? SST-2 fine-tuning on the first N training sentences (3 epochs, otherwise the
# flags of bert_wikitext2_sst2.sh), from a pretrained bert-mini and from random initialisation with the same
# tokenizer, for each N and seed; prints dev accuracy. The pretrained model defaults to the WikiText-2 one of
# bert_wikitext2_sst2.sh (runs/bert-mini-wikitext2); bert_wikitext2_sst2_tapt.sh's continued one
# (runs/bert-mini-wikitext2-sst2text) shares its tokenizer, so the two share the random-initialisation runs.
# The two runs of a pair go side by side, one thread each.
#
#   bash training/reproductions/bert_sst2_learning_curve.sh [path/to/shared/data] [sizes] [seeds] [pretrained folder] [learning rate]
#   bash training/reproductions/bert_sst2_learning_curve.sh ../shared/data "500 2000 8000" "42 43" runs/bert-mini-wikitext2-sst2text 3e-4
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
DATA=${1:-../shared/data}
SIZES=${2:-"500 2000 8000"}
SEEDS=${3:-"42 43"}
PRETRAINED=${4:-runs/bert-mini-wikitext2}
LR=${5:-1e-4}
if [ ! -f "$PRETRAINED/model.safetensors" ]; then
  echo "$PRETRAINED/model.safetensors is missing: run the reproduction that pretrains it first" >&2
  exit 1
fi
NAME=$(basename "$PRETRAINED")
SUFFIX=$([ "$LR" = 1e-4 ] && echo "" || echo "-lr$LR")
OUT=runs/sst2-learning-curve
mkdir -p "$OUT"
for N in $SIZES; do
  for SEED in $SEEDS; do
    sst2_flags "$DATA" "$LR" 3 "$SEED"
    finetune_pair "$PRETRAINED" "$NAME" "$OUT/{run}-n$N-seed$SEED$SUFFIX" "n=$N seed $SEED lr $LR" "${SST2[@]}" \
        --max_train_samples "$N" --eval_strategy no --logging_steps 50
  done
done
