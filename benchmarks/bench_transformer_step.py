"""Training step of ``TransformerForCausalLM`` against a minimal hand-written GPT of the same sizes.

The reference is the causal Transformer of nanoGPT's ``model.py`` written out in one file (:class:`HandGPT`):
pre-norm blocks, one fused query/key/value projection, ``F.scaled_dot_product_attention(is_causal=True)``,
exact GELU, learned positions, the output layer tied to the token embeddings, no biases, no dropout. Ours is
the GPT-shaped ``TransformerLMConfig`` of the same sizes (``normalize_before``, ``gelu``, ``learned``
positions, ``scale_embedding=False``, ``bias=False``, dropout 0), called as the LM trainer calls it
(``shift_labels``, ``use_cache=False``). Before timing, the reference is loaded with our weights and must
give the same loss.

A step is ``zero_grad``, forward with the loss, backward and an AdamW step (the same optimizer on both sides;
``--optim``), on ``--device`` (``auto``: the GPU when torch sees one; there TF32 is allowed for fp32 products, as
nanoGPT's ``train.py`` allows it), under bf16 autocast with ``--bf16``; ``--bf16-weights`` trains ours as the Transformer
LM's GPU presets do (``--bf16_weights``: bfloat16 weights, float32 master weights in its AdamW), while the reference
keeps nanoGPT's float32 weights under autocast. Rounds alternate between the contenders
(interleaved) and the ratio is the median over rounds of ours / reference. ``--compile`` adds two contenders,
timed in the same rounds: the reference passed through ``torch.compile(model)`` as nanoGPT's ``train.py``
compiles its GPT, and ours passed through ``torch.compile(model)`` as ``--torch_compile`` compiles it in the
training loop (inductor, default mode, both). Sizes:

* ``nanogpt``: nanoGPT's CPU configuration for Tiny Shakespeare: 4 layers, 4 heads, width 128, context 64,
  batch 12, 65 characters;
* ``4x256``: 4 layers, 4 heads, width 256, context 128, batch 32;
* ``nanogpt-shakespeare-char``: nanoGPT's GPU configuration for Tiny Shakespeare characters
  (``config/train_shakespeare_char.py``): 6 layers, 6 heads, width 384, context 256, batch 64, 65 characters
  (10.7 M parameters), dropout 0 here as on both sides above (nanoGPT trains it with 0.2);
* ``tiny``: 2 layers x 32, context 16, batch 4: a smoke test of the script, not a measurement.

Target: ours / reference <= 1.0 at every size, eager and compiled, on the same device.

    python -m benchmarks.bench_transformer_step
    python -m benchmarks.bench_transformer_step --sizes nanogpt --repeats 9 --bf16 --json out.json
    python -m benchmarks.bench_transformer_step --sizes nanogpt-shakespeare-char --bf16 --bf16-weights --compile  # GPU
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from hf_seqmodels import TransformerForCausalLM, TransformerLMConfig
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

TARGET = 1.0
SIZES = {  # layers, heads, width, context, batch, vocabulary, steps per timed round
    "nanogpt": dict(layers=4, heads=4, width=128, context=64, batch=12, vocab=65, steps=10),
    "4x256": dict(layers=4, heads=4, width=256, context=128, batch=32, vocab=65, steps=2),
    "nanogpt-shakespeare-char": dict(layers=6, heads=6, width=384, context=256, batch=64, vocab=65, steps=10),
    "tiny": dict(layers=2, heads=2, width=32, context=16, batch=4, vocab=65, steps=2),
}
DEFAULT_SIZES = ["nanogpt", "4x256"]  # the CPU's; nanogpt-shakespeare-char is a GPU's size


class HandBlock(nn.Module):
    """``x + Attn(LN(x))``, then ``x + MLP(LN(x))``; no biases."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, bias=False)
        self.c_attn = nn.Linear(width, 3 * width, bias=False)  # queries, keys and values at once
        self.c_proj = nn.Linear(width, width, bias=False)
        self.ln_2 = nn.LayerNorm(width, bias=False)
        self.c_fc = nn.Linear(width, 4 * width, bias=False)
        self.mlp_proj = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(width, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(batch, length, width))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class HandGPT(nn.Module):
    """Token and position embeddings, the blocks, a final LayerNorm and the tied output layer."""

    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(HandBlock(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, bias=False)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``idx``, ``targets`` ``(B, T)`` -> the mean next-token cross-entropy."""
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    @torch.no_grad()
    def load_from(self, model: TransformerForCausalLM) -> HandGPT:
        """Copy the weights of our model (its q, k, v projections stacked into ``c_attn``)."""
        stack = model.model
        self.wte.weight.copy_(stack.embeddings.embed_tokens.weight)
        self.wpe.weight.copy_(stack.embeddings.embed_positions.weight)
        for block, layer in zip(self.blocks, stack.layers, strict=True):
            attention = layer.self_attn
            block.ln_1.weight.copy_(layer.self_attn_norm.weight)
            block.c_attn.weight.copy_(torch.cat([attention.q_proj.weight, attention.k_proj.weight,
                                                 attention.v_proj.weight]))
            block.c_proj.weight.copy_(attention.out_proj.weight)
            block.ln_2.weight.copy_(layer.ffn_norm.weight)
            block.c_fc.weight.copy_(layer.feed_forward.fc1.weight)
            block.mlp_proj.weight.copy_(layer.feed_forward.fc2.weight)
        self.ln_f.weight.copy_(stack.final_norm.weight)
        return self


def gpt_shaped(size: dict) -> TransformerLMConfig:
    return TransformerLMConfig(
        vocab_size=size["vocab"], d_model=size["width"], decoder_layers=size["layers"],
        decoder_attention_heads=size["heads"], decoder_ffn_dim=4 * size["width"],
        max_position_embeddings=size["context"], normalize_before=True, activation_function="gelu",
        position_embedding_type="learned", scale_embedding=False, bias=False, dropout=0.0, pad_token_id=None,
        bos_token_id=None, eos_token_id=None,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, choices=list(SIZES))
    parser.add_argument("--optim", default="adamw_torch_fused", choices=["adamw_torch_fused", "adamw_torch"],
                        help="the optimizer of both sides (the training loop's --optim names)")
    parser.add_argument("--bf16", action="store_true", help="both sides under bf16 autocast (as --bf16 trains)")
    parser.add_argument("--bf16-weights", action="store_true",
                        help="with --bf16: ours trains with bf16 weights and fp32 master weights in its optimizer")
    parser.add_argument("--compile", action="store_true",
                        help="also time both sides passed through torch.compile, in the same rounds")
    add_device_arg(parser)
    add_common_args(parser, repeats=7, warmup=1)
    args = parser.parse_args(argv)
    if args.bf16_weights and not args.bf16:
        parser.error("--bf16-weights needs --bf16")
    return args


def stepper(model: nn.Module, loss_of, args: argparse.Namespace, device: torch.device, steps: int,
            master_weights: MasterWeights | None = None):
    """A round of ``steps`` training steps of ``model``; ``loss_of(model)`` runs its forward. With
    ``master_weights``, the optimizer updates their float32 copies of the (bfloat16) weights."""
    optimizer = adamw(model, master_weights, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1,
                      fused=args.optim == "adamw_torch_fused")
    autocast = precision(device, args.bf16)

    def run() -> None:
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_of(model)
            loss.backward()
            optimizer.step()

    return run


def allow_tf32(allowed: bool) -> None:
    """Let CUDA run fp32 matrix products and convolutions in TF32 (no effect on the CPU)."""
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed


def bench_size(name: str, args: argparse.Namespace, device: torch.device) -> dict:
    size = SIZES[name]
    torch.manual_seed(args.seed)
    ours = TransformerForCausalLM(gpt_shaped(size)).to(device).train()
    reference = HandGPT(size["vocab"], size["context"], size["width"], size["layers"], size["heads"])
    reference.load_from(ours).to(device).train()
    ids = torch.randint(0, size["vocab"], (size["batch"], size["context"] + 1)).to(device)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # (B, T) inputs and their next tokens

    def our_loss(model):
        return model(x, shift_labels=y, use_cache=False).loss

    def reference_loss(model):
        return model(x, y)

    allow_tf32(False)  # the check compares fp32 losses
    losses = {"ours": our_loss(ours).item(), "reference": reference_loss(reference).item()}
    tolerance = 1e-4 if device.type == "cuda" else 1e-5  # GPU kernels sum in other orders
    if abs(losses["ours"] - losses["reference"]) > tolerance * max(1.0, abs(losses["reference"])):
        raise SystemExit(f"FAIL: {name}: the reference with our weights gives another loss: {losses}")
    allow_tf32(device.type == "cuda")  # as nanoGPT's train.py; under --bf16 autocast the products are bf16 anyway
    counts = {"ours": len(list(ours.parameters())), "reference": len(list(reference.parameters()))}
    parameters = sum(p.numel() for p in reference.parameters())
    steps = size["steps"]
    models = {"ours": (ours, our_loss), "reference": (copy.deepcopy(reference), reference_loss)}
    if args.compile:
        models["ours compiled"] = (copy.deepcopy(ours), our_loss)
        models["reference compiled"] = (copy.deepcopy(reference), reference_loss)
    masters = {k: MasterWeights(models[k][0]) for k in ("ours", "ours compiled") if args.bf16_weights and k in models}
    models = {k: (torch.compile(model) if k.endswith("compiled") else model, loss_of)
              for k, (model, loss_of) in models.items()}
    contenders = {k: stepper(model, loss_of, args, device, steps, masters.get(k))
                  for k, (model, loss_of) in models.items()}
    times = interleaved_timings(contenders, args.repeats, args.warmup, sync=synchronizer(device))
    per_step = {k: statistics.median(t) / steps * 1e3 for k, t in times.items()}
    tokens = size["batch"] * size["context"]
    print(f"\n{name}: {size['layers']} layers x {size['width']}, {size['heads']} heads, context {size['context']}, "
          f"batch {size['batch']}, {parameters / 1e6:.2f} M parameters; parameter tensors ours {counts['ours']}, "
          f"reference {counts['reference']}; same loss before timing ({losses['ours']:.5f})")
    print_table(["contender", "ms/step", "tokens/s"], [[k, v, f"{tokens / v * 1e3:,.0f}"] for k, v in per_step.items()])
    label = f"{name} ({'bf16, ours bf16 weights' if args.bf16_weights else 'bf16' if args.bf16 else 'fp32'}, {args.optim})"
    results = [report_ratio(f"{label}: ours / hand-written step time", paired_ratio(times["ours"], times["reference"]),
                            TARGET, higher_is_better=False)]
    if args.compile:
        results.append(report_ratio(f"{label}: ours compiled / hand-written compiled step time",
                                    paired_ratio(times["ours compiled"], times["reference compiled"]), TARGET,
                                    higher_is_better=False))
    return {"size": name, **size, "parameters": parameters, "check": {"same_loss": True, "losses": losses},
            "ms_per_step": per_step, "parameter_tensors": counts, "results": results}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    device = resolve_device(args.device)
    hardware = device_name(device)
    print(f"torch {torch.__version__} on {hardware} ({device}), {torch.get_num_threads()} threads, {args.optim}, "
          f"{'bf16 autocast' if args.bf16 else 'fp32'}{', compiled beside eager' if args.compile else ''}; "
          f"median of {args.repeats} interleaved rounds")
    sizes = [bench_size(name, args, device) for name in args.sizes]
    summary = {"benchmark": "transformer_step", "device": str(device), "device_name": hardware, "args": vars(args),
               "sizes": sizes, "results": [result for size in sizes for result in size["results"]]}
    write_json(args.json, summary)
    return summary


if __name__ == "__main__":
    main()
