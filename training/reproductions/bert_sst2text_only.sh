#!/usr/bin/env bash
# Ablation of bert_wikitext2_sst2_tapt.sh: what does the WikiText-2 stage add to the gain from pretraining on
# SST-2's unlabelled text? The same masked-LM + next-sentence pretraining on the text of the SST-2 training set
# (pretrain_on_sst2_text in sst2_pair.sh: same flags, same 4,000 updates) starts from random initialisation
# instead of the WikiText-2 model, with an uncased 8,000-token WordPiece vocabulary trained on the WikiText-2 text
# (valid + test; the WikiText-2 run trains its own on the 95 % of the documents it does not hold out); then the
# SST-2 fine-tuning of the other reproductions, against random initialisation with this vocabulary. tokenizers
# numbers WordPiece pieces in an order that can change from one training to the next, so this vocabulary is not
# bit-identical to that of runs/bert-mini-wikitext2 and its random-initialisation runs are named
# scratch-wt2vocab, not scratch.
#
#   bash training/reproductions/bert_sst2text_only.sh [path/to/shared/data] [fine-tuning epochs] [seeds] [learning rate]
#   bash training/reproductions/bert_sst2text_only.sh ../shared/data 1 "42 43 44 45" 3e-4
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
sst2_arguments "$@"
VOCAB=runs/wikitext2-uncased-wordpiece-8000
if [ ! -f $VOCAB/tokenizer.json ]; then
  python tokenizer_scripts/train_tokenizer.py --tokenizer_kind wordpiece --vocab_size 8000 --lowercase --bert_special_tokens \
      --train_file "$DATA/wikitext2-heldout/valid.txt" "$DATA/wikitext2-heldout/test.txt" --output_dir $VOCAB
fi
ONLY=runs/bert-mini-sst2text
pretrain_on_sst2_text "$DATA" $ONLY --preset bert-mini --tokenizer_name $VOCAB

SCRATCH_RUN=scratch-wt2vocab finetune_seeds $ONLY sst2text
