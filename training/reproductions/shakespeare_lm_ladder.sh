#!/usr/bin/env bash
# The language-model ladder on Tiny Shakespeare, character level: the Bengio NNLM, a plain RNN,
# a GRU and an LSTM, trained with training/train_lm.py on the same split (first 90 % of the text for
# training, last 10 % for validation) and the same character tokenizer. Each run writes its loss
# curve, model card and Hub-ready model to runs/shakespeare-<name>/.
#
#   bash training/reproductions/shakespeare_lm_ladder.sh [path/to/input.txt]
#
# The time caps (--max_time_minutes) are sized for a 2-core CPU; on a GPU drop them and raise the epochs.
# STAGES=gated runs only the GRU and the LSTM.
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/background.sh  # a stopped script stops its runs too
DATA=${1:-../shared/data/tinyshakespeare/input.txt}
COMMON=(--train_file "$DATA" --validation_split_percentage 10 --tokenizer_kind char
        --per_device_train_batch_size 64 --block_size 100 --optim adamw_torch --learning_rate 2e-3
        --lr_scheduler_type cosine --warmup_steps 100 --lr_scheduler_kwargs '{"min_lr_ratio": 0.1}' --max_grad_norm 5.0
        --per_device_eval_batch_size 32 --seed 1234 --disable_tqdm)

run() {  # name, extra arguments...
  local name=$1; shift
  local start=$SECONDS
  python training/train_lm.py "${COMMON[@]}" --output_dir "runs/shakespeare-$name" "$@"
  echo "[$name] wall time $((SECONDS - start)) s" | tee -a runs/shakespeare-ladder-times.txt
}

mkdir -p runs
if [ "${STAGES:-all}" = all ]; then
run nnlm --model_family nnlm --preset bengio-2003 \
    --config_overrides "context_size=10,embedding_size=32,hidden_size=512" \
    --num_train_epochs 6 --max_time_minutes 8
run rnn --model_family rnn --preset char-rnn --config_overrides "cell_type=rnn_tanh,hidden_dropout_prob=0.1" \
    --num_train_epochs 6 --max_time_minutes 12
fi
# The two gated models train side by side, one core (one thread) each.
OMP_NUM_THREADS=1 run gru --model_family rnn --preset char-rnn --config_overrides "cell_type=gru" \
    --num_train_epochs 4 --max_time_minutes 22 &
OMP_NUM_THREADS=1 run lstm --model_family rnn --preset char-rnn --config_overrides "cell_type=lstm" \
    --num_train_epochs 4 --max_time_minutes 22 &
wait
