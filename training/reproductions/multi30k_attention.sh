#!/usr/bin/env bash
# Multi30k English→German: the plain RNN encoder-decoder (no attention), Bahdanau attention, Luong
# "general" attention and a small Transformer, each trained with training/train_seq2seq.py for the same
# wall-clock budget on one shared BPE tokenizer, then scored with sacreBLEU (beam search, 5 beams) on
# test_2016_flickr. Two models train at a time, one thread each (a 2-core machine), under bf16 autocast
# (--bf16: float32 master weights). Each run writes its translations, attention heatmap, loss curve and
# model card to runs/multi30k-<name>/.
#
#   bash training/reproductions/multi30k_attention.sh [path/to/multi30k] [minutes per model]
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/background.sh  # a stopped script stops its runs too
DATA=${1:-../shared/data/multi30k}
MINUTES=${2:-25}
mkdir -p runs/multi30k-tokenizer
zcat "$DATA/train.en.gz" "$DATA/train.de.gz" > runs/multi30k-tokenizer/train.en-de.txt
python tokenizer_scripts/train_tokenizer.py --train_file runs/multi30k-tokenizer/train.en-de.txt --tokenizer_kind bpe \
    --vocab_size 8000 --output_dir runs/multi30k-tokenizer
COMMON=(--train_source_file "$DATA/train.en.gz" --train_target_file "$DATA/train.de.gz"
        --validation_source_file "$DATA/val.en.gz" --validation_target_file "$DATA/val.de.gz"
        --test_source_file "$DATA/test_2016_flickr.en.gz" --test_target_file "$DATA/test_2016_flickr.de.gz"
        --tokenizer_name runs/multi30k-tokenizer
        --max_tokens_per_batch 3000 --max_source_length 64 --max_target_length 64 --max_grad_norm 1.0
        --num_train_epochs 20 --max_time_minutes "$MINUTES" --max_eval_samples 200 --num_beams 5
        --generation_max_length 64 --seed 1234 --disable_tqdm --bf16 --do_train --do_eval --do_predict)
RNN=(--model_family rnn_seq2seq --preset rnnsearch --optim adamw_torch --learning_rate 1e-3)
RNN_SIZE="embedding_size=256,hidden_size=256,attention_hidden_size=256,hidden_dropout_prob=0.2,init_range=0.1"
TRANSFORMER_SIZE="d_model=256,encoder_layers=3,decoder_layers=3,encoder_attention_heads=4,decoder_attention_heads=4"
TRANSFORMER_SIZE+=",encoder_ffn_dim=1024,decoder_ffn_dim=1024,dropout=0.1"

train() {  # name, extra arguments...
  local name=$1; shift
  OMP_NUM_THREADS=1 python training/train_seq2seq.py "${COMMON[@]}" --output_dir "runs/multi30k-$name" "$@" \
      > "runs/multi30k-$name.log" 2>&1
}

train none "${RNN[@]}" --config_overrides "$RNN_SIZE,attention_score=none" &
train bahdanau "${RNN[@]}" --config_overrides "$RNN_SIZE,attention_score=additive" &
wait
train luong-general "${RNN[@]}" --config_overrides "$RNN_SIZE,attention_score=general,attention_wiring=luong" &
# the transformer-base preset carries the paper's recipe (8 accumulated batches an update, 100,000 updates); at
# this budget every batch is an update and the time cap ends training
train transformer --model_family transformer --preset transformer-base --config_overrides "$TRANSFORMER_SIZE" \
    --optim adamw_torch --adam_beta2 0.98 --adam_epsilon 1e-9 --lr_scheduler_type noam --warmup_steps 400 \
    --learning_rate 1.0 --gradient_accumulation_steps 1 --max_steps -1 &
wait
grep -h "sacreBLEU" runs/multi30k-*.log
