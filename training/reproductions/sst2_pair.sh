# Sourced by the BERT reproductions: one SST-2 fine-tuning pair, from the pretrained bert-mini and from random
# initialisation with its tokenizer, side by side (one thread each); then each run's dev accuracy and time.
#
#   finetune_pair <pretrained model folder> <output pattern> <label> <training/finetune.py flags...>
#
# writes the output folders named by the pattern with "{run}" replaced by "pretrained" and by "scratch" (and
# their .log files beside them), e.g. "runs/sst2-bert-mini-{run}-seed42".
finetune_pair() {
  local model=$1 pattern=$2 label=$3
  shift 3
  local pretrained=${pattern//\{run\}/pretrained} scratch=${pattern//\{run\}/scratch}
  OMP_NUM_THREADS=1 python training/finetune.py "$@" --model_name_or_path "$model" \
      --output_dir "$pretrained" > "$pretrained.log" 2>&1 &
  OMP_NUM_THREADS=1 python training/finetune.py "$@" --preset bert-mini --tokenizer_name_or_path "$model" \
      --output_dir "$scratch" > "$scratch.log" 2>&1 &
  wait
  local run
  for run in pretrained scratch; do
    python -c "import json, sys; r = json.load(open(sys.argv[1])); print(sys.argv[2], 'dev accuracy', \
round(r['eval_accuracy'], 4), 'train s', round(r['train_runtime_seconds']))" \
        "${pattern//\{run\}/$run}/all_results.json" "$run $label"
  done
}
