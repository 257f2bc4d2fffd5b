# Sourced by the BERT reproductions: the fine-tuning flags they share and one SST-2 fine-tuning pair, from a pretrained bert-mini and from random
# initialisation with its tokenizer, side by side (one thread each); then each run's dev accuracy and time.
#
#   finetune_pair <pretrained model folder> <name of the pretrained run> <output pattern> <label> <training/finetune.py flags...>
#
# writes the output folders named by the pattern with "{run}" replaced by the pretrained run's name and by
# $SCRATCH_RUN ("scratch" unless set; and their .log files beside them), e.g. "runs/sst2-bert-mini-{run}-seed42".
# A run whose folder already holds all_results.json is reported, not repeated: the scratch run depends only on
# the tokenizer and the flags, so reproductions that share both share it (one with a tokenizer of its own sets
# SCRATCH_RUN to a name of its own).
source training/reproductions/background.sh  # a stopped script stops its fine-tuning runs too

finetune_pair() {
  local model=$1 name=$2 pattern=$3 label=$4
  shift 4
  local scratch_run=${SCRATCH_RUN:-scratch}
  local pretrained=${pattern//\{run\}/$name} scratch=${pattern//\{run\}/$scratch_run}
  if [ -f "$pretrained/all_results.json" ]; then
    echo "reusing $pretrained"
  else
    OMP_NUM_THREADS=1 python training/finetune.py "$@" --model_name_or_path "$model" \
        --output_dir "$pretrained" > "$pretrained.log" 2>&1 &
  fi
  if [ -f "$scratch/all_results.json" ]; then
    echo "reusing $scratch"
  else
    OMP_NUM_THREADS=1 python training/finetune.py "$@" --preset bert-mini --tokenizer_name "$model" \
        --output_dir "$scratch" > "$scratch.log" 2>&1 &
  fi
  wait
  local run
  for run in "$name" "$scratch_run"; do
    python -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], 'dev accuracy', \
round(r['eval_accuracy'], 4), 'train s', round(r['train_runtime_seconds']))" \
        "${pattern//\{run\}/$run}/all_results.json" "$run $label"
  done
}

# The training/finetune.py flags every SST-2 reproduction uses, into the array SST2 (callers add how often to
# evaluate and log, and any subset; on a CPU unless USE_CPU=False):
#   sst2_flags <path/to/shared/data> <learning rate> <epochs> <seed>
sst2_flags() {
  SST2=(--task sequence-classification --train_file "$1/sst2/train.tsv" --validation_file "$1/sst2/dev.tsv"
        --max_seq_length 64 --per_device_train_batch_size 32 --per_device_eval_batch_size 128
        --learning_rate "$2" --warmup_steps 0.06 --weight_decay 0.01 --num_train_epochs "$3"
        --save_strategy no --report_to none --use_cpu "${USE_CPU:-True}" --seed "$4" --disable_tqdm true)
}

# The arguments of bert_wikitext2_sst2.sh and bert_wikitext2_sst2_tapt.sh into DATA, EPOCHS, SEEDS and LR:
#   sst2_arguments [path/to/shared/data] [fine-tuning epochs] [seeds] [learning rate]
sst2_arguments() {
  DATA=${1:-../shared/data}
  EPOCHS=${2:-1}
  SEEDS=${3:-42}
  LR=${4:-1e-4}
}

# One fine-tuning pair per seed of SEEDS at LR for EPOCHS (see sst2_arguments), evaluated every epoch; the
# runs are named runs/sst2-bert-mini-{run}-seed{seed}, with -lr{LR} added unless LR is 1e-4:
#   finetune_seeds <pretrained model folder> <name of the pretrained run>
finetune_seeds() {
  local suffix seed
  suffix=$([ "$LR" = 1e-4 ] && echo "" || echo "-lr$LR")
  for seed in $SEEDS; do
    sst2_flags "$DATA" "$LR" "$EPOCHS" "$seed"
    finetune_pair "$1" "$2" "runs/sst2-bert-mini-{run}-seed$seed$suffix" "seed $seed lr $LR" "${SST2[@]}" \
        --eval_strategy epoch --logging_steps 100
  done
}

# Masked-LM + next-sentence pretraining on the text of the SST-2 training set (its 67,349 phrases without their
# labels; the dev set is never read), 20 phrases to a pseudo-document, so "IsNext" pairs are neighbouring
# phrases: 4,000 updates of 32 pairs of at most 64 tokens, AdamW 5e-4, cosine, on two threads. Skipped when
# the output folder already holds a model.
#   pretrain_on_sst2_text <path/to/shared/data> <output folder> <training/pretrain_bert.py flags naming the start...>
pretrain_on_sst2_text() {
  local data=$1 output=$2
  shift 2
  [ -f "$output/model.safetensors" ] && return 0
  mkdir -p runs
  python - "$data/sst2/train.tsv" runs/sst2-train-text.txt <<'PY'
import csv, sys
with open(sys.argv[1], newline="") as tsv, open(sys.argv[2], "w") as out:
    for i, row in enumerate(csv.DictReader(tsv, delimiter="\t", quoting=csv.QUOTE_NONE)):
        out.write(row["sentence"].strip() + "\n" + ("\n" if i % 20 == 19 else ""))
PY
  OMP_NUM_THREADS=2 python training/pretrain_bert.py "$@" --train_file runs/sst2-train-text.txt \
      --max_seq_length 64 --per_device_train_batch_size 32 --num_train_epochs 100 --max_steps 4000 --max_time_minutes 30 \
      --optim adamw_torch --learning_rate 5e-4 --adam_beta2 0.98 --adam_epsilon 1e-6 --weight_decay 0.01 \
      --lr_scheduler_type cosine --warmup_steps 200 --save_steps 500 --logging_steps 100 --disable_tqdm \
      --gradient_accumulation_steps 1 --max_grad_norm 5.0 --bf16 \
      --dataset_label sst2 --output_dir "$output" > "$output.log" 2>&1
}
