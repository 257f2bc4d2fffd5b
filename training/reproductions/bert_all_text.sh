#!/usr/bin/env bash
# BERT-mini pretrained with masked LM + next-sentence prediction on all the English text in the shared data
# folder (WikiText-2 valid + test articles, Tiny Shakespeare, the English side of the Multi30k training pairs and
# the text of the SST-2 training set without its labels; the SST-2 dev set is never read), then fine-tuned on
# SST-2 for every seed given, from that checkpoint and from random initialisation with the same tokenizer and
# flags; the paired comparison of the two closes the run.
# Documents for next-sentence prediction: WikiText articles as they are; Shakespeare in blocks of 40 lines; the
# Multi30k captions and the SST-2 phrases, which have no document order, 20 to a pseudo-document (as in
# sst2_pair.sh); the documents of all four are shuffled together (seed 0), so the 5 % held out for evaluation
# (the last documents) mixes them.
#
#   [DEVICE=cpu|cuda] [PARALLEL=2] [PRETRAIN_STEPS=6000] [PRETRAIN_MINUTES=50] [BATCH=256] [BF16=True] \
#       bash training/reproductions/bert_all_text.sh [path/to/shared/data] [fine-tuning epochs] [seeds] [learning rates]
#   DEVICE=cuda PARALLEL=10 bash training/reproductions/bert_all_text.sh ../shared/data 1 "42 43 44 45 46 47 48 49 50 51"
#
# Pretraining: bert-mini (4 layers, hidden 256), an uncased 8,000-token WordPiece vocabulary trained on the same
# text, pairs of at most 128 tokens, BATCH pairs per update, AdamW 1e-3 (β2 0.98), 5 % warm-up, cosine, bf16
# autocast (BF16=False trains in float32: faster on a CPU whose bf16 kernels are slow, which --bf16 reports),
# 5 % of the documents held out for the masked-LM and next-sentence accuracy; PRETRAIN_STEPS updates or
# PRETRAIN_MINUTES, whichever ends first. Fine-tuning: the flags of sst2_pair.sh (one epoch by default, batch
# 32), PARALLEL runs at a time (one CPU thread each on a CPU). Results: runs/bert-all-text/ (the pretrained
# model, its card and log), runs/sst2-bert-mini-{alltext,alltext-scratch}-seed<seed>[-lr<lr>]/
# and runs/bert-all-text/comparison-lr<lr>.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
source training/reproductions/sst2_pair.sh
sst2_arguments "$@"
LRS=${4:-1e-4}
DEVICE=${DEVICE:-cpu}
PARALLEL=${PARALLEL:-2}
PRETRAIN_STEPS=${PRETRAIN_STEPS:-6000}
PRETRAIN_MINUTES=${PRETRAIN_MINUTES:-50}
BATCH=${BATCH:-256}
BF16=${BF16:-True}
case $DEVICE in cpu) export USE_CPU=True ;; cuda) export USE_CPU=False ;;
  *) echo "DEVICE must be cpu or cuda, got $DEVICE" >&2; exit 2 ;; esac
OUT=runs/bert-all-text
mkdir -p "$OUT"

if [ ! -f "$OUT/corpus.txt" ]; then
  python - "$DATA" "$OUT/corpus.txt" <<'PY'
import csv, gzip, random, sys
from pathlib import Path
from hf_seqmodels.training.bert.data import split_documents
data, out_path = Path(sys.argv[1]), sys.argv[2]
def blocks(lines, size):  # consecutive non-empty lines, `size` to a document
    lines = [line.strip() for line in lines if line.strip()]
    return [lines[start:start + size] for start in range(0, len(lines), size)]
documents = []
for split in ("valid", "test"):  # WikiText: its articles, cut at their "= Title =" headings
    documents += split_documents((data / "wikitext2-heldout" / f"{split}.txt").read_text(encoding="utf-8"))
documents += blocks((data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8").splitlines(), 40)
with gzip.open(data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as captions:
    documents += blocks(captions, 20)
with open(data / "sst2" / "train.tsv", newline="", encoding="utf-8") as tsv:
    documents += blocks((row["sentence"] for row in csv.DictReader(tsv, delimiter="\t", quoting=csv.QUOTE_NONE)), 20)
random.Random(0).shuffle(documents)  # the held-out documents (the last ones) then come from every source
with open(out_path, "w", encoding="utf-8") as out:  # one sentence a line, a blank line after each document
    out.writelines("\n".join(document) + "\n\n" for document in documents)
print(f"{out_path}: {len(documents)} documents, {sum(map(len, documents))} sentences")
PY
fi

if [ ! -f "$OUT/model.safetensors" ]; then
  python training/pretrain_bert.py --preset bert-mini --train_file "$OUT/corpus.txt" \
      --vocab_size 8000 --lowercase --max_seq_length 128 --validation_split_percentage 5 \
      --per_device_train_batch_size "$BATCH" --per_device_eval_batch_size 256 --num_train_epochs 1000 \
      --max_steps "$PRETRAIN_STEPS" --max_time_minutes "$PRETRAIN_MINUTES" \
      --optim adamw_torch --learning_rate 1e-3 --adam_beta2 0.98 --adam_epsilon 1e-6 --weight_decay 0.01 \
      --lr_scheduler_type cosine --warmup_steps 0.05 --gradient_accumulation_steps 1 --max_grad_norm 1.0 --bf16 "$BF16" \
      --do_train --do_eval --eval_strategy steps --eval_steps "$(( (PRETRAIN_STEPS + 3) / 4 ))" \
      --save_steps "$(( (PRETRAIN_STEPS + 3) / 4 ))" --save_total_limit 1 --logging_steps 100 --disable_tqdm \
      --use_cpu "$USE_CPU" --dataset_label all-english-text --output_dir "$OUT" --overwrite_output_dir \
      > "$OUT.log" 2>&1
fi
grep -h "eval_loss=\|eval_mlm\|eval_nsp" "$OUT.log" | tail -n 4 || true

# Fine-tuning: every (seed, learning rate, start), PARALLEL at a time; a run that already finished is kept.
finetune() {  # output folder, then the flags that choose the start
  local output=$1; shift
  [ -f "$output/all_results.json" ] && return 0
  OMP_NUM_THREADS=1 python training/finetune.py "${SST2[@]}" --eval_strategy epoch \
      --logging_steps 100 --output_dir "$output" "$@" > "$output.log" 2>&1
}
status=0
throttle() {  # wait until fewer than $1 fine-tuning runs are running
  while (( $(jobs -rp | wc -l) >= $1 )); do wait -n || status=1; done
}
for lr in $LRS; do
  suffix=$([ "$lr" = 1e-4 ] && echo "" || echo "-lr$lr")
  for seed in $SEEDS; do
    sst2_flags "$DATA" "$lr" "$EPOCHS" "$seed"
    throttle "$PARALLEL"
    finetune "runs/sst2-bert-mini-alltext-seed$seed$suffix" --model_name_or_path "$OUT" &
    throttle "$PARALLEL"
    finetune "runs/sst2-bert-mini-alltext-scratch-seed$seed$suffix" --preset bert-mini --tokenizer_name "$OUT" &
  done
done
throttle 1
((status == 0)) || { echo "a fine-tuning run failed: see runs/sst2-bert-mini-alltext-*.log" >&2; exit 1; }
for lr in $LRS; do
  suffix=$([ "$lr" = 1e-4 ] && echo "" || echo "-lr$lr")
  # shellcheck disable=SC2086
  python training/reproductions/paired_comparison.py "runs/sst2-bert-mini-{run}-seed{seed}$suffix" \
      --runs alltext alltext-scratch --seeds $SEEDS | tee "$OUT/comparison-lr$lr.md"
done
