#!/usr/bin/env bash
# The Tiny Shakespeare character ladder at one budget: the Bengio NNLM, a plain RNN, a GRU, an LSTM and a
# decoder-only Transformer, each given MINUTES (default 30) of wall time on one CPU core (one torch thread),
# two runs side by side on a 2-core machine, bf16 autocast, the same split (first 90 % of the text for
# training, last 10 % for validation) and character tokenizer. The recurrent models carry their state along
# the validation text; the Transformer scores it in 256-character windows that move on by 128
# (--eval_stride), so every character also has at least 128 characters of context.
#
#   bash training/reproductions/shakespeare_lm_ladder_30min.sh [path/to/input.txt]
#
# Step and epoch counts are sized so each schedule ends inside the budget on an otherwise idle 2-core AMD
# EPYC; --max_time_minutes stops a slower run cleanly. STAGES="gru lstm" (any of transformer lstm gru rnn
# nnlm) runs only those, two at a time. THREADS=2 gives each run both cores instead, one run at a time
# (the Transformer then takes 3,900 steps, evaluated every 1,000). Results: runs/shakespeare-<name>-<THREADS>core30/
# (all_results.json, card).
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/background.sh  # a stopped script stops its runs too
DATA=${1:-../shared/data/tinyshakespeare/input.txt}
MINUTES=${MINUTES:-30}
STAGES=${STAGES:-"transformer lstm gru rnn nnlm"}
THREADS=${THREADS:-1}
case $THREADS in 1) TRANSFORMER_STEPS=2200 EVAL_STEPS=400 ;; 2) TRANSFORMER_STEPS=3900 EVAL_STEPS=1000 ;;
  *) echo "THREADS must be 1 (two runs side by side) or 2 (one run at a time), got $THREADS" >&2; exit 2 ;; esac
SUFFIX=${THREADS}core30
COMMON=(--train_file "$DATA" --validation_split_percentage 10 --tokenizer_kind char --per_device_eval_batch_size 32
        --seed 1234 --disable_tqdm --bf16)
# the recurrent models and the NNLM: AdamW 2e-3, cosine to a tenth, 64 streams of 100-character windows
RECURRENT=(--per_device_train_batch_size 64 --block_size 100 --optim adamw_torch --learning_rate 2e-3
           --lr_scheduler_type cosine --warmup_steps 100 --lr_scheduler_kwargs '{"min_lr_ratio": 0.1}'
           --max_grad_norm 5.0)

run() {  # name, extra arguments...
  local name=$1; shift
  local start=$SECONDS
  OMP_NUM_THREADS=$THREADS python training/train_lm.py "${COMMON[@]}" --output_dir "runs/shakespeare-$name-$SUFFIX" \
      --overwrite_output_dir --max_time_minutes "$MINUTES" "$@" > "runs/shakespeare-$name-$SUFFIX.log" 2>&1
  echo "[$name] wall time $((SECONDS - start)) s" | tee -a "runs/shakespeare-ladder-$SUFFIX-times.txt"
}

stage() {
  case $1 in
    # nanoGPT's recipe (AdamW 1e-3, beta2 0.99, weight decay 0.1, cosine to 1e-4) on a 4-layer, width-256 GPT
    # reading 16 windows of 256 characters a step, on a grid shifted every epoch
    transformer) run transformer --model_family transformer_lm --preset nanogpt-shakespeare-char \
        --config_overrides "d_model=256,decoder_layers=4,decoder_attention_heads=4,decoder_ffn_dim=1024,dropout=0.1,attention_dropout=0.1" \
        --per_device_train_batch_size 16 --block_size 256 --max_steps "$TRANSFORMER_STEPS" --eval_stride 128 \
        --eval_strategy steps --eval_steps "$EVAL_STEPS" --save_strategy steps --save_steps "$EVAL_STEPS" \
        --save_total_limit 2 ;;
    lstm) run lstm --model_family rnn --preset char-rnn "${RECURRENT[@]}" --config_overrides "cell_type=lstm" \
        --num_train_epochs 6 ;;
    gru) run gru --model_family rnn --preset char-rnn "${RECURRENT[@]}" --config_overrides "cell_type=gru" \
        --num_train_epochs 6 ;;
    rnn) run rnn --model_family rnn --preset char-rnn "${RECURRENT[@]}" \
        --config_overrides "cell_type=rnn_tanh,hidden_dropout_prob=0.1" --num_train_epochs 16 ;;
    nnlm) run nnlm --model_family nnlm --preset bengio-2003 "${RECURRENT[@]}" \
        --config_overrides "context_size=10,embedding_size=32,hidden_size=512" --num_train_epochs 40 ;;
  esac
}

mkdir -p runs
read -r -a stages <<< "$STAGES"
for name in "${stages[@]}"; do
  case $name in transformer|lstm|gru|rnn|nnlm) ;; *) echo "unknown stage: $name (allowed: transformer lstm gru rnn nnlm)" >&2; exit 2 ;; esac
done
if ((THREADS == 2)); then  # one run at a time on both cores
  for name in "${stages[@]}"; do stage "$name"; done
else
  for ((i = 0; i < ${#stages[@]}; i += 2)); do  # two runs side by side, one core each
    stage "${stages[i]}" &
    if ((i + 1 < ${#stages[@]})); then stage "${stages[i + 1]}" & fi
    wait
  done
fi
for name in "${stages[@]}"; do  # the ladder's table: validation loss (nats/char) of each run's last evaluation
  python -c "import json, sys; r = json.load(open(sys.argv[1])); print(f'{sys.argv[2]:12s} {r[\"eval_loss\"]:.4f}')" \
      "runs/shakespeare-$name-$SUFFIX/all_results.json" "$name"
done
