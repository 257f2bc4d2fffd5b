"""bf16 mixed precision on the CPU: training-step time of bf16 against fp32, and their loss curves.

bf16 here is what ``--bf16`` does in the training loop (accelerate's CPU autocast): fp32 master weights and
optimizer state, the forward under ``torch.autocast("cpu", dtype=torch.bfloat16)``, no loss scaling. A step
is ``zero_grad``, forward with labels, backward, AdamW step, for four families at small realistic sizes:

* Transformer LM: 4 layers x 256 (4 heads, FFN 1024), GPT-shaped (pre-norm, GELU, learned positions),
  batch 64 x 128;
* Transformer encoder-decoder: 4 + 4 layers x 256, batch 64, source and target 32 tokens (Multi30k-sized);
* BERT pre-training head (MLM + NSP): 4 layers x 256 (BERT-mini), batch 32 x 128, 15 % of tokens masked;
* LSTM LM: 2 layers x 256, batch 64 x 128.

The timing rounds alternate fp32 and bf16 (interleaved), each a few steps; the ratio is the median over rounds
of bf16 / fp32. Target: <= 0.5 for the Transformer families and BERT; the LSTM row is informational (its
recurrence is a sequence of small matrix products, where bf16 gains less).

The loss comparison trains each model from the same initial weights on the same batches (characters of Tiny
Shakespeare) with and without bf16 and prints both curves; they should agree within noise (the relative
difference of the last tenth's mean losses is printed).

    python -m benchmarks.bench_bf16
    python -m benchmarks.bench_bf16 --families transformer_lm bert --repeats 7 --loss-steps 200 --json out.json
"""

from __future__ import annotations

import argparse
import copy
import statistics
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from hf_seqmodels import (
    BertConfig,
    BertForPreTraining,
    RNNConfig,
    RNNForCausalLM,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
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

TARGET = 0.5
TEXT = Path(__file__).resolve().parents[1] / "hf_seqmodels" / "data" / "tiny_shakespeare.txt"
GPT_SHAPED = dict(normalize_before=True, activation_function="gelu", position_embedding_type="learned",
                  scale_embedding=False, dropout=0.0)
BatchFn = Callable[[torch.Generator, int], dict]  # (generator, rows) -> a batch of keyword inputs with labels


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--vocab-size", type=int, default=2048, help="model vocabulary (timing batches draw from it)")
    parser.add_argument("--steps-per-round", type=int, default=2, help="training steps in one timed round")
    parser.add_argument("--loss-steps", type=int, default=100, help="steps of the loss comparison (0: skip it)")
    parser.add_argument("--optim", default="adamw_torch_fused", choices=["adamw_torch_fused", "adamw_torch"],
                        help="the training loop's --optim: torch's fused AdamW kernel, or its per-tensor loop")
    parser.add_argument("--loss-batch-divisor", type=int, default=4,
                        help="the loss comparison trains on batches this many times smaller than the timed ones")
    add_common_args(parser, repeats=5, warmup=1)
    return parser.parse_args()


# ----------------------------------------------------------------------------------------------- the models --
def transformer_lm(vocab: int):
    config = TransformerLMConfig(vocab_size=vocab, d_model=256, decoder_layers=4, decoder_attention_heads=4,
                                 decoder_ffn_dim=1024, max_position_embeddings=128, **GPT_SHAPED)
    return TransformerForCausalLM(config), 64, lm_batch(128)


def transformer_seq2seq(vocab: int):
    config = TransformerConfig(vocab_size=vocab, d_model=256, encoder_layers=4, decoder_layers=4,
                               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
                               decoder_ffn_dim=1024, dropout=0.1, label_smoothing=0.1)
    return TransformerForConditionalGeneration(config), 64, seq2seq_batch(32)


def bert(vocab: int):
    config = BertConfig(vocab_size=vocab, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, max_position_embeddings=128)
    return BertForPreTraining(config), 32, bert_batch(128)


def lstm_lm(vocab: int):
    config = RNNConfig(vocab_size=vocab, cell_type="lstm", hidden_size=256, num_hidden_layers=2)
    return RNNForCausalLM(config), 64, lm_batch(128)


FAMILIES = {"transformer_lm": transformer_lm, "transformer_seq2seq": transformer_seq2seq, "bert": bert,
            "lstm_lm": lstm_lm}
HAS_TARGET = {"transformer_lm", "transformer_seq2seq", "bert"}


# ---------------------------------------------------------------------------------------------- the batches --
class Corpus:
    """Tiny Shakespeare as character ids ``4 ..`` (0-3 stay free for padding, [CLS], [SEP], [MASK])."""

    def __init__(self):
        text = TEXT.read_text()
        chars = sorted(set(text))
        self.ids = torch.tensor([chars.index(c) + 4 for c in text])  # 1.1 M ids, < 70 + 4
        self.vocab = len(chars) + 4

    def windows(self, generator: torch.Generator, rows: int, length: int) -> torch.Tensor:
        starts = torch.randint(0, len(self.ids) - length, (rows,), generator=generator)
        return torch.stack([self.ids[s : s + length] for s in starts.tolist()])  # (rows, length)


CORPUS: Corpus | None = None


def corpus() -> Corpus:
    global CORPUS
    CORPUS = CORPUS or Corpus()
    return CORPUS


def lm_batch(length: int) -> BatchFn:
    def make(generator: torch.Generator, rows: int) -> dict:
        ids = corpus().windows(generator, rows, length)
        return {"input_ids": ids, "labels": ids}

    return make


def seq2seq_batch(length: int) -> BatchFn:
    """Source: ``length`` characters; target: the ``length`` that follow them (continue the text)."""

    def make(generator: torch.Generator, rows: int) -> dict:
        ids = corpus().windows(generator, rows, 2 * length)
        return {"input_ids": ids[:, :length], "labels": ids[:, length:]}

    return make


def bert_batch(length: int, mask_rate: float = 0.15) -> BatchFn:
    """``[CLS] A [SEP] B`` with B the text after A (label 0) or a random window (1); 15 % of A and B are
    replaced by [MASK] (id 3) and predicted."""
    half = length // 2 - 1

    def make(generator: torch.Generator, rows: int) -> dict:
        first = corpus().windows(generator, rows, 2 * half)
        random_next = corpus().windows(generator, rows, half)
        nsp = torch.randint(0, 2, (rows,), generator=generator)
        second = torch.where(nsp[:, None].bool(), random_next, first[:, half:])
        cls, sep = torch.full((rows, 1), 1), torch.full((rows, 1), 2)
        ids = torch.cat([cls, first[:, :half], sep, second, sep], dim=1)[:, :length]  # (rows, length)
        masked = (torch.rand(ids.shape, generator=generator) < mask_rate) & (ids > 3)
        token_types = (torch.arange(ids.shape[1]) > half + 1).long().expand_as(ids)
        return {"input_ids": ids.masked_fill(masked, 3), "token_type_ids": token_types,
                "labels": ids.masked_fill(~masked, -100), "next_sentence_label": nsp}

    return make


def random_ids(batch: dict, vocab: int, generator: torch.Generator) -> dict:
    """The timing batch: the same shapes, ids drawn from the whole vocabulary (the model's real output size)."""
    out = dict(batch)
    for key in ("input_ids", "labels"):
        ids = torch.randint(4, vocab, batch[key].shape, generator=generator)
        out[key] = ids if key == "input_ids" else ids.masked_fill(batch[key] == -100, -100)
    return out


# ------------------------------------------------------------------------------------------------ the steps --
class Trainer:
    """One model copy and its AdamW; ``step(batch)`` returns the loss."""

    def __init__(self, model: torch.nn.Module, bf16: bool, fused: bool = True):
        self.model = model.train()
        self.bf16 = bf16
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1,
                                           fused=fused)

    def step(self, batch: dict) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else nullcontext():
            loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()
        return loss.item()


def time_family(name: str, args: argparse.Namespace) -> dict:
    model, rows, make_batch = FAMILIES[name](args.vocab_size)
    generator = torch.Generator().manual_seed(args.seed)
    batch = random_ids(make_batch(generator, rows), args.vocab_size, generator)
    fused = args.optim == "adamw_torch_fused"
    trainers = {"fp32": Trainer(model, False, fused), "bf16": Trainer(copy.deepcopy(model), True, fused)}

    def rounds(trainer: Trainer) -> Callable[[], None]:
        return lambda: [trainer.step(batch) for _ in range(args.steps_per_round)]

    times = interleaved_timings({k: rounds(t) for k, t in trainers.items()}, args.repeats, args.warmup)
    per_step = {k: statistics.median(t) / args.steps_per_round for k, t in times.items()}
    ratio = paired_ratio(times["bf16"], times["fp32"])
    shape = "x".join(str(s) for s in batch["input_ids"].shape)
    label = f"{name} (batch {shape}): bf16 / fp32 step time"
    result = report_ratio(label, ratio, TARGET if name in HAS_TARGET else None, higher_is_better=False)
    return {"family": name, "ms_per_step": {k: v * 1e3 for k, v in per_step.items()}, **result}


def loss_curves(name: str, args: argparse.Namespace) -> dict:
    """Train an fp32 and a bf16 copy of the same initial model on the same batches; both loss curves."""
    torch.manual_seed(args.seed)
    model, rows, make_batch = FAMILIES[name](args.vocab_size)
    rows = max(1, rows // args.loss_batch_divisor)
    curves = {}
    for label, bf16 in (("fp32", False), ("bf16", True)):
        fused = args.optim == "adamw_torch_fused"
        trainer, generator = Trainer(copy.deepcopy(model), bf16, fused), torch.Generator().manual_seed(args.seed)
        curves[label] = [trainer.step(make_batch(generator, rows)) for _ in range(args.loss_steps)]
    every = max(1, args.loss_steps // 10)
    print(f"\n{name}: loss, {args.loss_steps} steps of {rows} rows (mean of each {every} steps)")
    means = {k: [statistics.fmean(c[i : i + every]) for i in range(0, len(c), every)] for k, c in curves.items()}
    print_table(["step", "fp32", "bf16"], [[(i + 1) * every, a, b]
                                           for i, (a, b) in enumerate(zip(means["fp32"], means["bf16"], strict=True))])
    gap = (means["bf16"][-1] - means["fp32"][-1]) / means["fp32"][-1]
    print(f"{name}: last {every} steps, bf16 vs fp32 mean loss: {gap:+.2%}")
    return {"family": name, "curves": curves, "last_relative_difference": gap}


def main() -> None:
    args = parse_args()
    setup(args)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"bf16 autocast with fp32 master weights, {args.optim}; median of {args.repeats} interleaved rounds")
    timings, rows = [], []
    for name in args.families:
        timing = time_family(name, args)
        timings.append(timing)
        rows.append([name, timing["ms_per_step"]["fp32"], timing["ms_per_step"]["bf16"], timing["ratio"]])
    print()
    print_table(["family", "fp32 ms/step", "bf16 ms/step", "bf16 / fp32"], rows)
    losses = [loss_curves(name, args) for name in args.families] if args.loss_steps > 0 else []
    write_json(args.json, {"benchmark": "bf16", "args": vars(args), "timings": timings, "losses": losses})


if __name__ == "__main__":
    main()
