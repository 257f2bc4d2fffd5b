#!/usr/bin/env bash
# Task-adaptive pretraining (Gururangan et al. 2020, "Don't Stop Pretraining"): the bert-mini pretrained on
# WikiText-2 by bert_wikitext2_sst2.sh continues masked-LM + next-sentence pretraining on the *text* of the
# SST-2 training set (its 67,349 phrases without their labels; the dev set is never read), then is fine-tuned
# on SST-2 with the flags of bert_wikitext2_sst2.sh. The run from random initialisation is the same as there
# (same tokenizer, flags and seed), so an existing one is reused.
# SST-2's phrases have no document order: they are grouped 20 to a pseudo-document (pretrain_on_sst2_text in
# sst2_pair.sh), so next-sentence prediction stays in the objective but has little to learn there.
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
pretrain_on_sst2_text "$DATA" $TAPT --model_name_or_path runs/bert-mini-wikitext2 \
    --tokenizer_name runs/bert-mini-wikitext2

finetune_seeds $TAPT tapt
