"""One BERT pre-training step (masked LM + next-sentence prediction) against transformers' ``BertForPreTraining``.

Both models have the same config (default: vocabulary 30522, 4 layers, hidden 256, 4 heads, feed-forward
1024, dropout 0.1 as in BERT; ``--preset bert-base``: 12 layers, hidden 768, 12 heads, feed-forward 3072,
batch 32 x 512), the same weights (``hf_seqmodels.convert_bert``), the same batch and the same
optimizer (AdamW, fused on CUDA), and both run ``attn_implementation="sdpa"`` on ``--device`` (``auto``: the
GPU when torch sees one). ``--bf16`` runs both forwards under bf16 autocast (fp32 weights and optimizer).
``--bf16-weights`` (with ``--bf16``) trains ours as ``--bf16_weights`` does, as the GPU presets do: bfloat16
weights, float32 master weights in its AdamW (``hf_seqmodels.training.core.master_weights``); the reference keeps
float32 weights under autocast, as transformers' Trainer with ``bf16=True``.
A step is forward, backward and an AdamW step in train mode (dropout on); ``--steps`` steps make a timed round:

* ours: ``hf_seqmodels.BertForPreTraining(..., masked_positions_only=True)``: the masked-LM head (transform
  and vocabulary projection) runs only at the labelled positions, as in the original implementation, given as
  ``masked_lm_positions`` found on the CPU (padded to a multiple of 8), as the pretraining script's batches carry
  them: nothing is read back from the device;
* reference: ``transformers.BertForPreTraining``: vocabulary logits at every position, loss over the
  labelled ones;
* informational: ours with ``masked_positions_only=False`` (logits everywhere, as the reference), which
  isolates what the encoder and attention alone cost against the reference;
* ``--compile``: two more contenders, ours (masked positions) and the reference each passed through
  ``torch.compile(model)`` (inductor, default mode: what ``--torch_compile`` does to ours in training), timed
  in the same rounds as the eager ones.

Targets: step time ours / reference <= 0.75 eager (set on a CPU at the default sizes), <= 0.85 compiled (issue
39: BERT-base, batch 32 x 512, bf16, on a GPU); model FLOPs utilisation of ours (compiled when compiled)
>= 45 % of the GPU's peak.

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
interleaved rounds (bf16 under ``--bf16``), so that the fraction says how close the step comes to the machine's
large-matmul speed.

Model FLOPs utilisation (MFU), as nanoGPT's ``estimate_mfu`` and the PaLM paper (appendix B) count it: the
model's FLOPs per step over the step time, divided by the device's peak dense bf16 FLOP/s::

    model FLOPs per step = 6 P B T + 12 L H T^2 B

with ``P`` the parameters of the model (the word embeddings counted once, as the masked-LM decoder shares them;
position and token-type embeddings left out, as they are lookups), ``B T`` the tokens of the batch (padding
included: the encoder computes there) and ``12 L H T^2 B`` the attention's two products (forward and backward).
The same count serves every contender: it is the model's work, not what an implementation chose to compute
(ours skips the vocabulary projection at unlabelled positions, which is why its MFU can be higher at equal
kernels). Peaks: a small table of known GPUs (H100/H200 SXM 989 TFLOP/s, H100 PCIe 756, A100 312), or
``--peak-tflops``; on a CPU, or a GPU not in the table, the script prints the achieved FLOP/s and says that MFU
needs a known peak.

    python -m benchmarks.bench_bert_pretraining
    python -m benchmarks.bench_bert_pretraining --threads 1 --repeats 7 --json bert_pretraining.json
    python -m benchmarks.bench_bert_pretraining --preset bert-base --bf16 --bf16-weights --compile --steps 10  # GPU
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
import transformers

from hf_seqmodels import BertForPreTraining
from hf_seqmodels.convert_bert import from_transformers_bert
from hf_seqmodels.training.bert.trainer import masked_lm_positions
from hf_seqmodels.training.core.master_weights import MasterWeights

from .common import (
    adamw,
    add_common_args,
    add_device_arg,
    device_name,
    interleaved_timings,
    paired_ratio,
    precision,
    print_table,
    report_ratio,
    resolve_device,
    setup,
    synchronizer,
    write_json,
)

TARGET, TARGET_COMPILED, TARGET_MFU = 0.75, 0.85, 0.45
PAD, CLS, SEP, MASK, FIRST_WORD = 0, 1, 2, 3, 4
OURS, OURS_FULL, REFERENCE, MATMUL = "ours (masked positions)", "ours (full logits)", "BertForPreTraining", "mm"
OURS_COMPILED, REFERENCE_COMPILED = "ours (masked positions), compiled", "BertForPreTraining, compiled"
PRESETS = {  # sizes; the command line's own values win
    "bert-mini": dict(vocab_size=30522, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                      batch_size=32, seq_length=128),
    "bert-base": dict(vocab_size=30522, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072,
                      batch_size=32, seq_length=512),
}
#: dense bf16 peak TFLOP/s by a substring of the GPU's name, first match wins (the vendors' datasheets)
PEAK_BF16_TFLOPS = [("H100 PCIe", 756.0), ("H100", 989.0), ("H200", 989.0), ("A100", 312.0)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), default="bert-mini",
                        help="model and batch sizes (bert-base: 12 x 768, batch 32 x 512); the options below override")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--hidden-size", type=int)
    parser.add_argument("--num-layers", type=int)
    parser.add_argument("--num-heads", type=int)
    parser.add_argument("--intermediate-size", type=int)
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (timing only)")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--seq-length", type=int)
    parser.add_argument("--mask-prob", type=float, default=0.15, help="share of the real tokens labelled")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=1, help="training steps per timed round")
    parser.add_argument("--bf16", action="store_true", help="forwards under bf16 autocast (fp32 weights)")
    parser.add_argument("--bf16-weights", action="store_true",
                        help="with --bf16: ours trains with bf16 weights and fp32 master weights in its optimizer")
    parser.add_argument("--compile", action="store_true",
                        help="also time ours and the reference passed through torch.compile, in the same rounds")
    parser.add_argument("--peak-tflops", type=float,
                        help="the device's peak dense bf16 TFLOP/s for MFU (default: from a table of known GPUs)")
    parser.add_argument("--matmul-size", type=int, default=2048, help="side of the square matrices")
    parser.add_argument("--matmul-count", type=int, default=4, help="products per timed matmul round")
    add_device_arg(parser)
    add_common_args(parser, repeats=3, warmup=1)
    args = parser.parse_args(argv)
    if args.bf16_weights and not args.bf16:
        parser.error("--bf16-weights needs --bf16")
    for name, value in PRESETS[args.preset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


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


def model_flops(args, reference: transformers.BertForPreTraining) -> float:
    """Model FLOPs of one step, ``6 P B T + 12 L H T^2 B`` (the module docstring), for MFU."""
    embeddings = reference.bert.embeddings
    lookups = embeddings.position_embeddings.weight.numel() + embeddings.token_type_embeddings.weight.numel()
    parameters = sum(p.numel() for p in reference.parameters()) - lookups  # tied weights are listed once
    b, t = args.batch_size, args.seq_length
    return 6.0 * parameters * b * t + 12.0 * args.num_layers * args.hidden_size * t * t * b


def peak_flops(args, device: torch.device) -> float | None:
    """The device's peak dense bf16 FLOP/s: ``--peak-tflops``, else the table's entry for the GPU, else None."""
    if args.peak_tflops is not None:
        return args.peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_BF16_TFLOPS:
            if key in name:
                return tflops * 1e12
    return None


def check_same_loss(reference, ours, batch: dict, tolerance: float) -> dict[str, float]:
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
    if any(abs(loss - expected) > tolerance * max(1.0, abs(expected)) for loss in losses.values()):
        raise SystemExit(f"FAIL: the models disagree on the loss of the same batch: {losses}")
    return losses


def stepper(model, args, device: torch.device, batch: dict, master_weights: MasterWeights | None = None, **kwargs):
    """A round of ``args.steps`` training steps of ``model`` (forward under ``--bf16``'s autocast), its own AdamW
    (over ``master_weights``' float32 copies when given)."""
    optimizer = adamw(model, master_weights, lr=args.lr, fused=device.type == "cuda")
    autocast = precision(device, args.bf16)

    def run() -> None:
        for _ in range(args.steps):
            with autocast():
                loss = model(**batch, **kwargs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return run


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    device = resolve_device(args.device)
    hardware = device_name(device)
    generator = torch.Generator().manual_seed(args.seed)
    reference, ours = make_models(args)
    batch = make_batch(args, generator)
    masked = int((batch["labels"] != -100).sum())
    real = int(batch["attention_mask"].sum())
    reference, ours = reference.to(device), ours.to(device)
    batch = {name: tensor.to(device) for name, tensor in batch.items()}
    # GPU kernels sum in other orders than the CPU's: a looser check there, still far below any real difference
    losses = check_same_loss(reference, ours, batch, tolerance=1e-4 if device.type == "cuda" else 1e-5)
    print(f"same weights, same batch, eval mode: total loss {losses[REFERENCE]:.5f} (BertForPreTraining), "
          f"{losses[OURS_FULL]:.5f} (ours, full logits), {losses[OURS]:.5f} (ours, masked positions)")

    # ours twice more (full logits; compiled), the reference once more (compiled): each its own weights and AdamW
    models = {OURS: ours, REFERENCE: reference, OURS_FULL: copy.deepcopy(ours)}
    if args.compile:
        models[OURS_COMPILED] = copy.deepcopy(ours)
        models[REFERENCE_COMPILED] = copy.deepcopy(reference)
    masters = {name: MasterWeights(models[name]) for name in (OURS, OURS_FULL, OURS_COMPILED)
               if args.bf16_weights and name in models}
    for name in (OURS_COMPILED, REFERENCE_COMPILED):
        if name in models:
            models[name] = torch.compile(models[name])
    for model in models.values():
        model.train()
    masked_only = {OURS: True, OURS_FULL: False, OURS_COMPILED: True}  # the reference takes no such argument
    positions = masked_lm_positions(batch["labels"].cpu(), pad_to_multiple_of=8).to(device)
    contenders = {}
    for name, model in models.items():
        kwargs = {"masked_positions_only": masked_only[name]} if name in masked_only else {}
        if masked_only.get(name):
            kwargs["masked_lm_positions"] = positions
        contenders[name] = stepper(model, args, device, batch, masters.get(name), **kwargs)
    size, dtype = args.matmul_size, torch.bfloat16 if args.bf16 else torch.float32
    left = torch.randn(size, size, generator=generator).to(device, dtype)
    right = torch.randn(size, size, generator=generator).to(device, dtype)

    def matmuls() -> None:
        for _ in range(args.matmul_count):
            torch.mm(left, right)

    times = interleaved_timings({**contenders, MATMUL: matmuls}, repeats=args.repeats, warmup=args.warmup,
                                sync=synchronizer(device))

    n = args.batch_size * args.seq_length
    flops = {name: args.steps * step_flops(args, masked if masked_only.get(name) else n) for name in contenders}
    flops[MATMUL] = 2.0 * size**3 * args.matmul_count
    per_model = args.steps * model_flops(args, reference)
    peak = peak_flops(args, device)
    median = {name: statistics.median(t) for name, t in times.items()}
    precision_name = ("bf16 autocast, ours with bf16 weights and fp32 master weights" if args.bf16_weights
                      else "bf16 autocast" if args.bf16 else "fp32")
    print(f"\nBERT pre-training step (MLM + NSP, AdamW, train mode, dropout {args.dropout}, sdpa, {precision_name}) "
          f"on {hardware} ({device}): V={args.vocab_size} L={args.num_layers} H={args.hidden_size} "
          f"A={args.num_heads} I={args.intermediate_size}, batch {args.batch_size} x {args.seq_length} ({real} real "
          f"tokens, {masked} masked), {args.steps} steps x {args.repeats} rounds, {torch.get_num_threads()} threads")
    print_table(
        ["contender", "ms/step", "model TFLOP/s", "MFU", "matmul GFLOP/step", "of mm FLOP/s"],
        [[name, median[name] / args.steps * 1e3, f"{per_model / median[name] / 1e12:.4g}",
          "n/a" if peak is None else per_model / median[name] / peak,
          flops[name] / args.steps / 1e9, flops[name] / median[name] / (flops[MATMUL] / median[MATMUL])]
         for name in contenders],
    )
    print(f"({MATMUL}: {args.matmul_count} x torch.mm of two {size}x{size} {str(dtype).removeprefix('torch.')} "
          f"matrices; model FLOPs {per_model / args.steps / 1e12:.3f} TFLOP/step)\n")

    def flop_fraction(name: str) -> float:
        """(FLOP/s of the step) / (FLOP/s of the large matmul), paired round by round."""
        return paired_ratio(times[MATMUL], times[name]) * flops[name] / flops[MATMUL]

    results = [
        report_ratio(f"step time {OURS} / {REFERENCE}", paired_ratio(times[OURS], times[REFERENCE]), TARGET,
                     higher_is_better=False),
        report_ratio(f"step time {OURS_FULL} / {REFERENCE}", paired_ratio(times[OURS_FULL], times[REFERENCE])),
        report_ratio(f"step time {OURS} / {OURS_FULL}", paired_ratio(times[OURS], times[OURS_FULL])),
        report_ratio(f"achieved FLOP/s {OURS} / large mm", flop_fraction(OURS)),
        report_ratio(f"achieved FLOP/s {REFERENCE} / large mm", flop_fraction(REFERENCE)),
    ]
    if args.compile:
        results += [
            report_ratio(f"step time {OURS_COMPILED} / {REFERENCE_COMPILED}",
                         paired_ratio(times[OURS_COMPILED], times[REFERENCE_COMPILED]), TARGET_COMPILED,
                         higher_is_better=False),
            report_ratio(f"step time {OURS_COMPILED} / {OURS}", paired_ratio(times[OURS_COMPILED], times[OURS])),
            report_ratio(f"step time {REFERENCE_COMPILED} / {REFERENCE}",
                         paired_ratio(times[REFERENCE_COMPILED], times[REFERENCE])),
        ]
    headline = OURS_COMPILED if args.compile else OURS
    if peak is None:
        print(f"MFU: n/a on {hardware}: it needs the device's peak bf16 FLOP/s, known for "
              f"{', '.join(key for key, _ in PEAK_BF16_TFLOPS)} (--peak-tflops sets one); model TFLOP/s of "
              + ", ".join(f"{name} {per_model / median[name] / 1e12:.3g}" for name in contenders))
    else:
        print(f"MFU against a peak of {peak / 1e12:.0f} TFLOP/s (bf16, dense):")
        for name in contenders:
            results.append(report_ratio(f"MFU {name}", per_model / median[name] / peak,
                                        TARGET_MFU if name == headline else None))
    summary = {"benchmark": "bert_pretraining", "device": str(device), "device_name": hardware, "args": vars(args),
               "check": {"same_loss": True, "losses": losses}, "masked_positions": masked, "step_flops": flops,
               "model_flops_per_step": per_model / args.steps, "peak_flops": peak, "times_s": times,
               "results": results}
    write_json(args.json, summary)
    return summary


if __name__ == "__main__":
    main()
