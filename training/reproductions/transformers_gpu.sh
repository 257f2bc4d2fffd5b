#!/usr/bin/env bash
# The two Transformer rows of the model-card table on one GPU, trained side by side on the same card:
#  - the Transformer LM on Tiny Shakespeare characters with nanoGPT's GPU configuration and recipe
#    (--preset nanogpt-shakespeare-char: 6 layers, 6 heads, width 384, 256 characters of context, dropout 0.2,
#    5,000 steps), stopped after MINUTES_LM minutes of training (nanoGPT reports 1.47 after about 3 minutes on an A100);
#  - a small Transformer on Multi30k English→German (--preset transformer-multi30k), trained for MINUTES_MT
#    minutes, then test_2016_flickr translated with beam search (5 beams) and scored with sacreBLEU.
# Each run writes its model card, loss curve and results to runs/<name>/; the two logs and the figures
# (transformers-gpu.txt) go to LOG_DIR (default runs/), written as the runs go. A BPE tokenizer folder trained
# beforehand (tokenizer.json) can be given as the third argument; without it the Multi30k tokenizer is trained
# into runs/multi30k-tokenizer first (once: kept for later runs). On a CPU the same commands run, far slower.
#
#   [MINUTES_LM=5] [MINUTES_MT=5] [LOG_DIR=runs] bash training/reproductions/transformers_gpu.sh \
#       [tinyshakespeare.txt] [multi30k folder] [tokenizer folder]
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/background.sh  # a stopped script stops its runs too
TEXT=${1:-../shared/data/tinyshakespeare/input.txt}
DATA=${2:-../shared/data/multi30k}
TOKENIZER=${3:-runs/multi30k-tokenizer}
MINUTES_LM=${MINUTES_LM:-5}
MINUTES_MT=${MINUTES_MT:-5}
LOG_DIR=${LOG_DIR:-runs}
mkdir -p runs "$LOG_DIR"

python training/train_lm.py --model_family transformer_lm --preset nanogpt-shakespeare-char --train_file "$TEXT" \
    --validation_split_percentage 10 --tokenizer_kind char --per_device_eval_batch_size 64 \
    --eval_strategy steps --eval_steps 500 --logging_steps 100 --max_time_minutes "$MINUTES_LM" \
    --output_dir runs/shakespeare-transformer-gpu --overwrite_output_dir --disable_tqdm \
    > "$LOG_DIR/shakespeare-transformer-gpu.log" 2>&1 &
lm=$!

if [ ! -f "$TOKENIZER/tokenizer.json" ]; then
  mkdir -p "$TOKENIZER"
  zcat "$DATA/train.en.gz" "$DATA/train.de.gz" > "$TOKENIZER/train.en-de.txt"
  python tokenizer_scripts/train_tokenizer.py --train_file "$TOKENIZER/train.en-de.txt" \
      --tokenizer_kind bpe --vocab_size 8000 --output_dir "$TOKENIZER"
fi
python training/train_seq2seq.py --model_family transformer --preset transformer-multi30k \
    --train_source_file "$DATA/train.en.gz" --train_target_file "$DATA/train.de.gz" \
    --validation_source_file "$DATA/val.en.gz" --validation_target_file "$DATA/val.de.gz" \
    --test_source_file "$DATA/test_2016_flickr.en.gz" --test_target_file "$DATA/test_2016_flickr.de.gz" --do_train --do_eval --do_predict \
    --tokenizer_name "$TOKENIZER" --max_tokens_per_batch 4096 --max_source_length 64 \
    --max_target_length 64 --eval_strategy steps --eval_steps 1000 --logging_steps 100 --max_eval_samples 200 \
    --num_beams 5 --generation_max_length 64 --max_time_minutes "$MINUTES_MT" \
    --output_dir runs/multi30k-transformer-gpu --overwrite_output_dir --disable_tqdm \
    > "$LOG_DIR/multi30k-transformer-gpu.log" 2>&1 &
mt=$!
failed=0
wait "$lm" || { echo "the Tiny Shakespeare run failed (exit $?): see $LOG_DIR/shakespeare-transformer-gpu.log"; failed=1; }
wait "$mt" || { echo "the Multi30k run failed (exit $?): see $LOG_DIR/multi30k-transformer-gpu.log"; failed=1; }
{
  echo "Tiny Shakespeare, nanogpt-shakespeare-char, $MINUTES_LM minutes:"
  grep -h "eval_loss=" "$LOG_DIR/shakespeare-transformer-gpu.log" | tail -n 12 || true
  echo "Multi30k test_2016_flickr, transformer-multi30k, $MINUTES_MT minutes:"
  grep -h "eval_loss=\|sacreBLEU" "$LOG_DIR/multi30k-transformer-gpu.log" | tail -n 12 || true
} | tee "$LOG_DIR/transformers-gpu.txt"
exit "$failed"
