"""One BERT pre-training step (masked LM + next-sentence prediction) against transformers' ``BertForPreTraining``.

Both models have the same config (default: vocabulary 30522, 4 layers, hidden 256, 4 heads, feed-forward
1024, dropout 0.1 as in BERT), the same weights (``hf_seqmodels.convert_bert``), the same batch and the same
optimizer, and both run ``attn_implementation="sdpa"``. A step is forward, backward and an AdamW step in
train mode (dropout on):

* ours: ``hf_seqmodels.BertForPreTraining(..., masked_positions_only=True)``: the masked-LM head (transform
  and vocabulary projection) runs only at the labelled positions, as in the original implementation;
* reference: ``transformers.BertForPreTraining``: vocabulary logits at every position, loss over the
  labelled ones;
* informational: ours with ``masked_positions_only=False`` (logits everywhere, as the reference), which
  isolates what the encoder and attention alone cost against the reference.

Target: step time ours / reference <= 0.75.

Before timing, the script checks in eval mode (dropout off) that the reference, ours with full logits
and ours with logits at masked positions only give the same total loss on the batch (exit status 1
otherwise).

The batch: ``--batch-size`` (32) sequences ``[CLS] A [SEP] B [SEP]`` right-padded to ``--seq-length``
(128), real lengths uniform in ``[T/2, T]`` (the first row full), ``token_type_ids`` 1 on ``B [SEP]``,
``--mask-prob`` (15 %) of the non-special tokens labelled (-100 elsewhere) and replaced 80/10/10 by
[MASK] / a random token / themselves, random ``next_sentence_label``. Ids: 0 pad, 1 [CLS], 2 [SEP],
3 [MASK], the rest random words.

Achieved FLOP/s. The step's floating-point operations are counted from its matrix products, with
``B`` sequences, ``T`` padded length, ``N = B T`` positions, ``M`` positions at which the masked-LM
head runs (the labelled ones for ours, all ``N`` for the full-logits contenders), ``L`` layers,
hidden ``H``, feed-forward ``I``, vocabulary ``V``::

    forward = L (8 N H^2            Q, K, V and output projections
                 + 4 N H I          the two feed-forward maps
                 + 4 B T^2 H)       Q K^T and (attention weights) V, all heads, padded length
              + 2 B H^2 + 4 B H     pooler and next-sentence classifier
              + 2 M H^2 + 2 M H V   masked-LM transform and vocabulary projection
    step    = 3 forward             the backward pass costs twice the forward (both input and weight gradients)

(each product of an ``a x b`` and a ``b x c`` matrix counts ``2 a b c``; softmax, GELU, LayerNorm,
dropout, the loss and AdamW's element-wise update are left out). The step's FLOP/s is that count over
the measured step time; the script divides it by the FLOP/s of ``--matmul-count`` products of two
``--matmul-size`` (2048) square fp32 matrices (``torch.mm``), timed as one more contender in the same
interleaved rounds, so that the fraction says how close the step comes to the machine's large-matmul
speed.

    python -m benchmarks.bench_bert_pretraining
    python -m benchmarks.bench_bert_pretraining --threads 1 --repeats 7 --json bert_pretraining.json
"""

from __future__ import annotations

import argparse
import statistics

import torch
import transformers

from hf_seqmodels import BertForPreTraining
from hf_seqmodels.convert_bert import from_transformers_bert

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)

TARGET = 0.75
PAD, CLS, SEP, MASK, FIRST_WORD = 0, 1, 2, 3, 4
OURS, OURS_FULL, REFERENCE, MATMUL = "ours (masked positions)", "ours (full logits)", "BertForPreTraining", "mm"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--intermediate-size", type=int, default=1024)
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (timing only)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--mask-prob", type=float, default=0.15, help="share of the real tokens labelled")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--matmul-size", type=int, default=2048, help="side of the square fp32 matrices")
    parser.add_argument("--matmul-count", type=int, default=4, help="products per timed matmul round")
    add_common_args(parser, repeats=3, warmup=1)
    return parser.parse_args()


def make_models(args) -> tuple[transformers.BertForPreTraining, BertForPreTraining]:
    """transformers' model with random weights, and ours converted from it (the same weights)."""
    config = transformers.BertConfig(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size, num_hidden_layers=args.num_layers,
        num_attention_heads=args.num_heads, intermediate_size=args.intermediate_size,
        hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout,
        max_position_embeddings=max(512, args.seq_length), pad_token_id=PAD, attn_implementation="sdpa",
    )
    reference = transformers.BertForPreTraining(config)
    ours = from_transformers_bert(reference, attn_implementation="sdpa")
    for model in (reference, ours):
        if model.config._attn_implementation != "sdpa":
            raise SystemExit(f"FAIL: {type(model).__module__} runs {model.config._attn_implementation}, not sdpa")
    return reference, ours


def make_batch(args, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Right-padded ``[CLS] A [SEP] B [SEP]`` pairs with BERT's masking (see the module docstring)."""
    b, t = args.batch_size, args.seq_length
    lengths = torch.randint(t // 2, t + 1, (b,), generator=generator)
    lengths[0] = t  # the padded length is really used
    positions = torch.arange(t)[None]  # (1, T)
    attention_mask = (positions < lengths[:, None]).long()  # (B, T)
    split = (lengths // 2)[:, None]  # the first [SEP]; sentence B starts after it
    tokens = torch.randint(FIRST_WORD, args.vocab_size, (b, t), generator=generator)
    tokens = tokens.masked_fill(positions == 0, CLS)
    tokens = tokens.masked_fill((positions == split) | (positions == lengths[:, None] - 1), SEP)
    tokens = tokens * attention_mask  # padding is 0
    token_type_ids = ((positions > split) & attention_mask.bool()).long()
    words = tokens >= FIRST_WORD
    selected = words & (torch.rand(b, t, generator=generator) < args.mask_prob)  # (B, T)
    labels = torch.where(selected, tokens, -100)
    draw = torch.rand(b, t, generator=generator)
    random_words = torch.randint(FIRST_WORD, args.vocab_size, (b, t), generator=generator)
    input_ids = torch.where(selected & (draw < 0.8), MASK, tokens)
    input_ids = torch.where(selected & (draw >= 0.8) & (draw < 0.9), random_words, input_ids)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (b,), generator=generator),
    }


def step_flops(args, head_positions: int) -> float:
    """Matrix-product FLOPs of one training step (the formula of the module docstring)."""
    b, t, h, i, v = args.batch_size, args.seq_length, args.hidden_size, args.intermediate_size, args.vocab_size
    n = b * t
    layer = 8 * n * h * h + 4 * n * h * i + 4 * b * t * t * h
    forward = args.num_layers * layer + 2 * b * h * h + 4 * b * h + 2 * head_positions * h * h \
        + 2 * head_positions * h * v
    return 3.0 * forward


def check_same_loss(reference, ours, batch: dict) -> dict[str, float]:
    """Total loss of the three contenders in eval mode (dropout off); stop if they differ."""
    reference.eval(), ours.eval()
    with torch.no_grad():
        losses = {
            REFERENCE: reference(**batch).loss.item(),
            OURS_FULL: ours(**batch, masked_positions_only=False).loss.item(),
            OURS: ours(**batch, masked_positions_only=True).loss.item(),
        }
    reference.train(), ours.train()
    expected = losses[REFERENCE]
    if any(abs(loss - expected) > 1e-5 * max(1.0, abs(expected)) for loss in losses.values()):
        raise SystemExit(f"FAIL: the models disagree on the loss of the same batch: {losses}")
    return losses


def train_step(model, optimizer: torch.optim.Optimizer, batch: dict, **kwargs) -> None:
    model(**batch, **kwargs).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main() -> None:
    args = parse_args()
    setup(args)
    generator = torch.Generator().manual_seed(args.seed)
    reference, ours = make_models(args)
    # ours twice (masked positions / full logits), from the same weights, each with its own optimizer
    ours_full = from_transformers_bert(reference, attn_implementation="sdpa")
    batch = make_batch(args, generator)
    masked = int((batch["labels"] != -100).sum())
    real = int(batch["attention_mask"].sum())
    losses = check_same_loss(reference, ours, batch)
    print(f"same weights, same batch, eval mode: total loss {losses[REFERENCE]:.5f} (BertForPreTraining), "
          f"{losses[OURS_FULL]:.5f} (ours, full logits), {losses[OURS]:.5f} (ours, masked positions)")

    reference.train(), ours.train(), ours_full.train()
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=args.lr)
                  for name, model in ((REFERENCE, reference), (OURS, ours), (OURS_FULL, ours_full))}
    size = args.matmul_size
    left, right = torch.randn(size, size, generator=generator), torch.randn(size, size, generator=generator)

    def matmuls() -> None:
        for _ in range(args.matmul_count):
            torch.mm(left, right)

    times = interleaved_timings(
        {
            OURS: lambda: train_step(ours, optimizers[OURS], batch, masked_positions_only=True),
            REFERENCE: lambda: train_step(reference, optimizers[REFERENCE], batch),
            OURS_FULL: lambda: train_step(ours_full, optimizers[OURS_FULL], batch, masked_positions_only=False),
            MATMUL: matmuls,
        },
        repeats=args.repeats,
        warmup=args.warmup,
    )

    n = args.batch_size * args.seq_length
    flops = {OURS: step_flops(args, masked), REFERENCE: step_flops(args, n), OURS_FULL: step_flops(args, n),
             MATMUL: 2.0 * size**3 * args.matmul_count}
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"\nBERT pre-training step (MLM + NSP, AdamW, train mode, dropout {args.dropout}, sdpa): "
          f"V={args.vocab_size} L={args.num_layers} H={args.hidden_size} A={args.num_heads} "
          f"I={args.intermediate_size}, batch {args.batch_size} x {args.seq_length} ({real} real tokens, "
          f"{masked} masked), {args.repeats} rounds, {torch.get_num_threads()} threads")
    print_table(
        ["contender", "median s", "GFLOP", "GFLOP/s", "of mm FLOP/s"],
        [[name, median[name], flops[name] / 1e9, flops[name] / median[name] / 1e9,
          flops[name] / median[name] / (flops[MATMUL] / median[MATMUL])] for name in times],
    )
    print(f"({MATMUL}: {args.matmul_count} x torch.mm of two {size}x{size} fp32 matrices)\n")

    def flop_fraction(name: str) -> float:
        """(FLOP/s of the step) / (FLOP/s of the large matmul), paired round by round."""
        return paired_ratio(times[MATMUL], times[name]) * flops[name] / flops[MATMUL]

    results = [
        report_ratio(f"step time {OURS} / {REFERENCE}", paired_ratio(times[OURS], times[REFERENCE]), TARGET,
                     higher_is_better=False),
        report_ratio(f"step time {OURS_FULL} / {REFERENCE}", paired_ratio(times[OURS_FULL], times[REFERENCE])),
        report_ratio(f"step time {OURS} / {OURS_FULL}", paired_ratio(times[OURS], times[OURS_FULL])),
        report_ratio(f"achieved FLOP/s {OURS} / large fp32 mm", flop_fraction(OURS)),
        report_ratio(f"achieved FLOP/s {REFERENCE} / large fp32 mm", flop_fraction(REFERENCE)),
    ]
    write_json(args.json, {"benchmark": "bert_pretraining", "args": vars(args), "losses": losses,
                           "masked_positions": masked, "step_flops": flops, "times_s": times,
                           "results": results})


if __name__ == "__main__":
    main()
