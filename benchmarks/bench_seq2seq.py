"""Decoding and training speed of the encoder-decoders, as ratios measured in one run.

Attention RNN (``RNNSeq2SeqForConditionalGeneration``, Bahdanau wiring by default):

* beam search with ``--rnn-beams`` (5) against greedy on a batch of ``--rnn-batch`` (32) sources,
  both run to ``--new-tokens`` steps without an EOS token — target < 3×: the beams run as one batch, not a Python loop;
  the same ratio of transformers' ``MarianMTModel`` (sizes below) is printed beside it as the reference of
  what batched beam search costs a decoder whose steps are dominated by matrix products;
* training throughput (target tokens per second of a teacher-forced step), informational.

Transformer (``TransformerForConditionalGeneration``) against transformers' ``MarianMTModel`` built
from a config of the same sizes (post-norm, ReLU, sinusoidal positions, same vocabulary):

* beam search (``--tf-beams`` 4, batch ``--tf-batch`` 16, 64 new tokens): ours / Marian — target <= 1
  (the per-round ratios are printed too: on a busy machine they spread by several per cent);
* greedy decoding of the same batch: ours / Marian, informational;
* greedy decoding of 128 tokens with the key/value cache against recomputing the whole prefix every
  step (``use_cache=False``), informational;
* one training step (forward, backward, AdamW): ours / Marian, informational.

    python -m benchmarks.bench_seq2seq
    python -m benchmarks.bench_seq2seq --threads 1 --repeats 7 --json seq2seq.json
"""

from __future__ import annotations

import argparse
import statistics

import torch
from transformers import MarianConfig, MarianMTModel

from hf_seqmodels import (
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TransformerConfig,
    TransformerForConditionalGeneration,
)

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--source-length", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=32, help="RNN decoding steps")
    parser.add_argument("--rnn-hidden", type=int, default=256)
    parser.add_argument("--rnn-batch", type=int, default=32)
    parser.add_argument("--rnn-beams", type=int, default=5)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--tf-batch", type=int, default=16)
    parser.add_argument("--tf-beams", type=int, default=4)
    parser.add_argument("--tf-new-tokens", type=int, default=64)
    parser.add_argument("--cache-tokens", type=int, default=128)
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--train-target-length", type=int, default=24)
    add_common_args(parser, repeats=5, warmup=1)
    return parser.parse_args()


def decode(model, source: torch.Tensor, new_tokens: int, num_beams: int = 1, use_cache: bool = True):
    """Exactly ``new_tokens`` decoding steps, greedy or beam search.

    Decoding runs without an EOS token (``eos_token_id=None``), so every hypothesis runs to
    ``max_new_tokens``. ``min_new_tokens`` would force the same length, but transformers then adds a
    ``min_length`` and a ``min_new_tokens`` processor that each copy and mask the whole ``(rows, vocab)``
    score matrix every step: work that grows with the number of beams and is not beam search's.
    """
    return model.generate(source, attention_mask=torch.ones_like(source), do_sample=False, num_beams=num_beams,
                          max_new_tokens=new_tokens, eos_token_id=None, use_cache=use_cache)


def same_work(contenders: dict) -> None:
    """Run every contender once and check that they produce outputs of one shape (the same amount of work)."""
    shapes = {name: tuple(fn().shape) for name, fn in contenders.items()}
    if len(set(shapes.values())) != 1:
        raise SystemExit(f"the contenders do different work: output shapes {shapes}")


def report_paired(label: str, numerator: list[float], denominator: list[float], target: float | None = None) -> dict:
    """:func:`report_ratio` of a time ratio (lower is better), plus the spread of the per-round ratios."""
    result = report_ratio(label, paired_ratio(numerator, denominator), target, higher_is_better=False)
    rounds = sorted(n / d for n, d in zip(numerator, denominator, strict=True))
    print(f"  per round: min {rounds[0]:.3f}, max {rounds[-1]:.3f}")
    result["round_ratios"] = rounds
    return result


def train_step(model, optimizer, batch: dict) -> None:
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def timed(label: str, contenders: dict, args, unit_count: float, unit: str) -> dict[str, list[float]]:
    times = interleaved_timings(contenders, repeats=args.repeats, warmup=args.warmup)
    print(f"\n{label}, {args.repeats} rounds")
    print_table(["contender", "median s", unit],
                [[name, statistics.median(t), unit_count / statistics.median(t)] for name, t in times.items()])
    return times


def random_batch(args, batch: int, generator: torch.Generator) -> dict:
    source = torch.randint(4, args.vocab_size, (batch, args.source_length), generator=generator)
    labels = torch.randint(4, args.vocab_size, (batch, args.train_target_length), generator=generator)
    return {"input_ids": source, "attention_mask": torch.ones_like(source), "labels": labels}


def bench_rnn(args, generator: torch.Generator) -> list[dict]:
    config = RNNSeq2SeqConfig.from_preset("rnnsearch", vocab_size=args.vocab_size, embedding_size=args.rnn_hidden,
                                          hidden_size=args.rnn_hidden, encoder_hidden_size=args.rnn_hidden,
                                          attention_hidden_size=args.rnn_hidden, hidden_dropout_prob=0.0)
    model = RNNSeq2SeqForConditionalGeneration(config).eval()
    source = torch.randint(4, args.vocab_size, (args.rnn_batch, args.source_length), generator=generator)
    n, beams = args.new_tokens, args.rnn_beams
    _, marian = transformer_pair(args)
    marian.eval()
    with torch.no_grad():
        times = timed(f"attention RNN ({config.attention_score}, {config.attention_wiring}) and MarianMTModel: "
                      f"batch {args.rnn_batch}, {n} new tokens",
                      {"greedy": lambda: decode(model, source, n),
                       f"beam {beams}": lambda: decode(model, source, n, beams),
                       "MarianMTModel greedy": lambda: decode(marian, source, n),
                       f"MarianMTModel beam {beams}": lambda: decode(marian, source, n, beams)},
                      args, args.rnn_batch * n, "tokens/s")
    ratios = [report_ratio(f"RNN: beam {beams} / greedy (batch {args.rnn_batch})",
                           paired_ratio(times[f"beam {beams}"], times["greedy"]), 3.0, higher_is_better=False),
              report_ratio(f"reference, MarianMTModel: beam {beams} / greedy (batch {args.rnn_batch})",
                           paired_ratio(times[f"MarianMTModel beam {beams}"], times["MarianMTModel greedy"]))]
    model.train()
    batch = random_batch(args, args.train_batch, generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = timed("attention RNN training step", {"RNN train step": lambda: train_step(model, optimizer, batch)},
                  args, batch["labels"].numel(), "target tokens/s")
    print(f"RNN training: {batch['labels'].numel() / statistics.median(steps['RNN train step']):.0f} target tokens/s "
          "(informational)")
    return ratios


def transformer_pair(args) -> tuple[TransformerForConditionalGeneration, MarianMTModel]:
    """Ours and Marian with the same sizes (random weights: the timing does not depend on them)."""
    sizes = dict(vocab_size=args.vocab_size, d_model=args.d_model, encoder_layers=args.layers,
                 decoder_layers=args.layers, encoder_attention_heads=args.heads, decoder_attention_heads=args.heads,
                 encoder_ffn_dim=4 * args.d_model, decoder_ffn_dim=4 * args.d_model, max_position_embeddings=256)
    ours = TransformerForConditionalGeneration(TransformerConfig(**sizes, dropout=0.0, attention_dropout=0.0))
    marian = MarianMTModel(MarianConfig(**sizes, dropout=0.0, attention_dropout=0.0, activation_function="relu",
                                        pad_token_id=0, eos_token_id=3, decoder_start_token_id=2,
                                        forced_eos_token_id=None, scale_embedding=True))
    return ours, marian


def bench_transformer(args, generator: torch.Generator) -> list[dict]:
    ours, marian = transformer_pair(args)
    ours.eval(), marian.eval()
    source = torch.randint(4, args.vocab_size, (args.tf_batch, args.source_length), generator=generator)
    n, beams = args.tf_new_tokens, args.tf_beams
    with torch.no_grad():
        beam = {"ours": lambda: decode(ours, source, n, beams), "MarianMTModel": lambda: decode(marian, source, n, beams)}
        greedy = {"ours": lambda: decode(ours, source, n), "MarianMTModel": lambda: decode(marian, source, n)}
        same_work(beam)
        same_work(greedy)
        beam_times = timed(f"Transformer beam {beams}: batch {args.tf_batch}, {n} new tokens", beam,
                           args, args.tf_batch * n, "tokens/s")
        greedy_times = timed(f"Transformer greedy: batch {args.tf_batch}, {n} new tokens", greedy,
                             args, args.tf_batch * n, "tokens/s")
        one = source[:1]
        cache_times = timed(f"Transformer greedy, {args.cache_tokens} tokens, batch 1",
                            {"with cache": lambda: decode(ours, one, args.cache_tokens),
                             "recompute prefix": lambda: decode(ours, one, args.cache_tokens, use_cache=False)},
                            args, args.cache_tokens, "tokens/s")
    ours.train(), marian.train()
    batch = random_batch(args, args.train_batch, generator)
    opt_ours, opt_marian = torch.optim.AdamW(ours.parameters()), torch.optim.AdamW(marian.parameters())
    train_times = timed(f"Transformer training step, batch {args.train_batch}",
                        {"ours": lambda: train_step(ours, opt_ours, batch),
                         "MarianMTModel": lambda: train_step(marian, opt_marian, batch)},
                        args, batch["labels"].numel(), "target tokens/s")
    return [
        report_paired(f"Transformer: beam {beams} time ours / MarianMTModel",
                      beam_times["ours"], beam_times["MarianMTModel"], 1.0),
        report_paired("Transformer: greedy time ours / MarianMTModel", greedy_times["ours"], greedy_times["MarianMTModel"]),
        report_ratio(f"Transformer: {args.cache_tokens} tokens, recompute / cache",
                     paired_ratio(cache_times["recompute prefix"], cache_times["with cache"])),
        report_paired("Transformer: training step time ours / MarianMTModel",
                      train_times["ours"], train_times["MarianMTModel"]),
    ]


def main() -> None:
    args = parse_args()
    setup(args)
    generator = torch.Generator().manual_seed(args.seed)
    results = bench_rnn(args, generator) + bench_transformer(args, generator)
    write_json(args.json, {"benchmark": "seq2seq", "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
