#!/usr/bin/env bash
# Does pretraining pay at a small scale? A bert-mini (4 layers, hidden 256, 4 heads) is pretrained with
# masked LM + next-sentence prediction on the WikiText-2 text (valid + test, ~0.46 M words), then
# fine-tuned on SST-2; the same architecture with the same tokenizer is fine-tuned from random
# initialisation with the same hyper-parameters. Both report dev accuracy. Pretraining runs alone on one
# thread (34-minute cap); the two fine-tuning runs go side by side, one thread each.
#
#   bash training/reproductions/bert_wikitext2_sst2.sh [path/to/shared/data] [fine-tuning epochs]
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:-../shared/data}
EPOCHS=${2:-1}
mkdir -p runs
OMP_NUM_THREADS=1 python training/pretrain_bert.py --preset bert-mini \
    --train_file "$DATA/wikitext2-heldout/valid.txt" "$DATA/wikitext2-heldout/test.txt" \
    --vocab_size 16000 --max_seq_length 64 --per_device_train_batch_size 32 \
    --num_train_epochs 20 --max_steps 1800 --max_train_minutes 34 \
    --optimizer adamw --learning_rate 5e-4 --adam_beta2 0.98 --adam_epsilon 1e-6 --weight_decay 0.01 \
    --lr_scheduler cosine --warmup_steps 300 --checkpointing_steps 300 --logging_steps 50 --disable_tqdm \
    --output_dir runs/bert-mini-wikitext2 > runs/bert-mini-wikitext2.log 2>&1

SST2=(--task sequence-classification --train_file "$DATA/sst2/train.tsv" --validation_file "$DATA/sst2/dev.tsv"
      --max_seq_length 64 --per_device_train_batch_size 32 --per_device_eval_batch_size 128
      --learning_rate 1e-4 --warmup_steps 0.06 --weight_decay 0.01 --num_train_epochs "$EPOCHS"
      --eval_strategy epoch --save_strategy no --logging_steps 100 --report_to none --use_cpu --seed 42
      --disable_tqdm true)
OMP_NUM_THREADS=1 python training/finetune.py "${SST2[@]}" --model_name_or_path runs/bert-mini-wikitext2 \
    --output_dir runs/sst2-bert-mini-pretrained > runs/sst2-bert-mini-pretrained.log 2>&1 &
OMP_NUM_THREADS=1 python training/finetune.py "${SST2[@]}" --preset bert-mini \
    --tokenizer_name_or_path runs/bert-mini-wikitext2 \
    --output_dir runs/sst2-bert-mini-scratch > runs/sst2-bert-mini-scratch.log 2>&1 &
wait
for run in pretrained scratch; do
  python -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], 'dev accuracy', \
round(r['eval_accuracy'], 4), 'train s', round(r['train_runtime_seconds']))" \
      "runs/sst2-bert-mini-$run/all_results.json" "$run"
done
