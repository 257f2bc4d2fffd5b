#!/usr/bin/env bash
# Does pretraining pay at a small scale? A bert-mini (4 layers, hidden 256, 4 heads) is pretrained with
# masked LM + next-sentence prediction on the WikiText-2 text (valid + test, ~0.46 M words), then
# fine-tuned on SST-2; the same architecture with the same tokenizer (uncased: SST-2 is lowercased) is
# fine-tuned from random initialisation with the same hyper-parameters. Both report dev accuracy, for each
# seed given (and the fine-tuning learning rate given).
# Pretraining runs alone on two threads (50-minute cap); the fine-tuning runs of one seed go side by
# side, one thread each.
#
#   bash training/reproductions/bert_wikitext2_sst2.sh [path/to/shared/data] [fine-tuning epochs] [seeds] [learning rate]
#   bash training/reproductions/bert_wikitext2_sst2.sh ../shared/data 1 "42 43"
#   bash training/reproductions/bert_wikitext2_sst2.sh ../shared/data 1 42 3e-5   # runs named ...-lr3e-5
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
sst2_arguments "$@"
mkdir -p runs
if [ ! -f runs/bert-mini-wikitext2/model.safetensors ]; then
  OMP_NUM_THREADS=2 python training/pretrain_bert.py --preset bert-mini \
      --train_file "$DATA/wikitext2-heldout/valid.txt" "$DATA/wikitext2-heldout/test.txt" \
      --vocab_size 8000 --lowercase --max_seq_length 64 --per_device_train_batch_size 32 \
      --num_train_epochs 100 --max_steps 5500 --max_time_minutes 50 \
      --optim adamw_torch --learning_rate 1e-3 --adam_beta2 0.98 --adam_epsilon 1e-6 --weight_decay 0.01 \
      --lr_scheduler_type cosine --warmup_steps 500 --save_steps 500 --logging_steps 100 --disable_tqdm \
      --gradient_accumulation_steps 1 --max_grad_norm 5.0 --bf16 \
      --output_dir runs/bert-mini-wikitext2 > runs/bert-mini-wikitext2.log 2>&1
fi

finetune_seeds runs/bert-mini-wikitext2 pretrained
