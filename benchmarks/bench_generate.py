"""Decoding speed of ``RNNForCausalLM.generate()`` against a hand-written greedy loop on the same weights.

For each batch size the contenders decode exactly ``--new-tokens`` tokens after the same random
prompt. The main comparison has no end-of-sequence token (``eos_token_id=None``), so every row runs to
the length asked for:

* hand loop: ``embed_tokens -> nn.LSTM -> lm_head`` called directly with the state carried by
  hand, argmax; no Hugging Face machinery;
* forward loop: the same loop through ``model(input_ids, past_key_values=state)`` (informational:
  splits the overhead between the model's forward and ``generate()``);
* generate greedy: ``model.generate(max_new_tokens=N, eos_token_id=None, do_sample=False)``;
* generate beam: the same with ``num_beams=4`` (informational, compared with greedy).

A second, informational pair keeps the model's EOS token and forces the length with ``min_length``
(``min_length = max_length``), the other way to get a fixed length: ``generate()`` then also runs
transformers' ``MinLengthLogitsProcessor`` (an ``isin`` over the whole vocabulary and a signature
inspection on every step) and the EOS stopping criterion, and the hand loop masks the EOS logit:

* hand loop, EOS masked / generate greedy, min_length.

Greedy contenders of a pair must produce identical tokens; the script stops with exit status 1 if not.
Target: time of generate greedy / time of hand loop <= 1.3 (the first pair).

    python -m benchmarks.bench_generate
    python -m benchmarks.bench_generate --batch-sizes 1 8 32 --new-tokens 512 --json out.json
"""

from __future__ import annotations

import argparse
import statistics

import torch

from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.models.cache_naming import cache_field, output_cache

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)

TARGET = 1.3


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=10000)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--cell-type", default="lstm", choices=["lstm", "gru", "rnn_tanh", "rnn_relu"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--prompt-length", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--num-beams", type=int, default=4)
    add_common_args(parser, repeats=9, warmup=0)
    return parser.parse_args()


@torch.no_grad()
def hand_loop(model: RNNForCausalLM, prompt: torch.Tensor, new_tokens: int, mask_eos: bool = False) -> torch.Tensor:
    """Greedy decoding through the raw torch modules: ``(B, P)`` prompt -> ``(B, P + new_tokens)`` ids.
    ``mask_eos`` sets the EOS logits to -inf on every step (what ``min_length`` does)."""
    embed, rnn = model.model.embed_tokens, model.model.encoder.rnn
    eos_ids = eos_token_ids(model) if mask_eos else []
    tokens, state, step_input = [prompt], None, prompt
    for _ in range(new_tokens):
        outputs, state = rnn(embed(step_input), state)  # (B, T, H); state in torch layout (L, B, H)
        last = outputs[:, -1]  # (B, H)
        if model.output_projection is not None:
            last = model.output_projection(last)
        logits = model.lm_head(last)  # (B, V)
        if eos_ids:
            logits[:, eos_ids] = float("-inf")  # min_length: EOS is not allowed yet
        step_input = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens.append(step_input)
    return torch.cat(tokens, dim=1)


@torch.no_grad()
def forward_loop(model: RNNForCausalLM, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """The same greedy loop (no EOS) through the model's own forward, the cache passed as ``past_key_values``."""
    tokens, state, step_input = [prompt], None, prompt
    for _ in range(new_tokens):
        out = model(input_ids=step_input, **cache_field(state), use_cache=True)
        state = output_cache(out)
        step_input = out.logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens.append(step_input)
    return torch.cat(tokens, dim=1)


def generate(model: RNNForCausalLM, prompt: torch.Tensor, new_tokens: int, num_beams: int = 1) -> torch.Tensor:
    """``model.generate`` greedy (``num_beams=1``) or beam search of exactly ``new_tokens`` tokens, without EOS."""
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, num_beams=num_beams,
                          max_new_tokens=new_tokens, eos_token_id=None)


def generate_min_length(model: RNNForCausalLM, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy ``generate`` with the model's EOS, held off by ``min_length = max_length``. The length is fixed
    with ``min_length``/``max_length`` rather than ``min_new_tokens``: transformers turns ``min_new_tokens``
    into a ``min_length`` as well and then runs both EOS-masking processors on every step."""
    length = prompt.shape[1] + new_tokens
    return model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, num_beams=1,
                          max_length=length, min_length=length)


def eos_token_ids(model: RNNForCausalLM) -> list[int]:
    """The EOS ids of the model's generation config as a list (it may hold one id, several or none)."""
    eos = model.generation_config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


PAIRS = (("hand loop", "forward loop", "generate greedy"), ("hand loop, EOS masked", "generate greedy, min_length"))


def check_same_tokens(contenders: dict, batch_size: int) -> None:
    """Run every contender once (this also warms them up); exit with status 1 if the greedy contenders of
    a pair produce different tokens, or a run is not of the length asked for."""
    outputs = {name: fn() for name, fn in contenders.items()}
    lengths = {tuple(out.shape) for out in outputs.values()}
    if len(lengths) != 1:
        raise SystemExit(f"FAIL: batch {batch_size}: the contenders produced different shapes {lengths}")
    for names in PAIRS:
        reference = outputs[names[0]]
        for name in names[1:]:
            if not torch.equal(outputs[name], reference):
                differ = (outputs[name] != reference).nonzero()
                raise SystemExit(f"FAIL: batch {batch_size}: {name} and {names[0]} produce different tokens "
                                 f"(first difference at row, position {differ[0].tolist()})")
        print(f"batch {batch_size}: identical tokens from {', '.join(names)} ({tuple(reference.shape)})")


def bench_batch(model: RNNForCausalLM, args: argparse.Namespace, batch_size: int) -> dict:
    """Check and time the contenders at one batch size; print the table and the ratios."""
    generator = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(4, args.vocab_size, (batch_size, args.prompt_length), generator=generator)
    n = args.new_tokens
    contenders = {
        "hand loop": lambda: hand_loop(model, prompt, n),
        "forward loop": lambda: forward_loop(model, prompt, n),
        "generate greedy": lambda: generate(model, prompt, n),
        "generate beam": lambda: generate(model, prompt, n, num_beams=args.num_beams),
        "hand loop, EOS masked": lambda: hand_loop(model, prompt, n, mask_eos=True),
        "generate greedy, min_length": lambda: generate_min_length(model, prompt, n),
    }
    check_same_tokens(contenders, batch_size)
    times = interleaved_timings(contenders, repeats=args.repeats, warmup=args.warmup)
    print(f"\nbatch {batch_size}, prompt {args.prompt_length}, {n} new tokens, {args.repeats} rounds")
    rows = [[name, statistics.median(t), statistics.median(t) / n * 1e3] for name, t in times.items()]
    print_table(["contender", "median s", "ms/token step"], rows)
    ratio = lambda a, b: paired_ratio(times[a], times[b])  # noqa: E731
    ratios = [
        report_ratio(f"batch {batch_size}: generate greedy / hand loop", ratio("generate greedy", "hand loop"),
                     TARGET, higher_is_better=False),
        report_ratio(f"batch {batch_size}: forward loop / hand loop", ratio("forward loop", "hand loop")),
        report_ratio(f"batch {batch_size}: generate greedy, min_length / hand loop, EOS masked",
                     ratio("generate greedy, min_length", "hand loop, EOS masked")),
        report_ratio(f"batch {batch_size}: beam {args.num_beams} / greedy", ratio("generate beam", "generate greedy")),
    ]
    return {"batch_size": batch_size, "times_s": times, "ratios": ratios}


def main() -> None:
    args = parse_args()
    setup(args)
    config = RNNConfig(vocab_size=args.vocab_size, cell_type=args.cell_type, hidden_size=args.hidden_size,
                       num_hidden_layers=args.num_layers)
    model = RNNForCausalLM(config).eval()
    print(f"{args.cell_type} LM: V={args.vocab_size} H={args.hidden_size} L={args.num_layers}")
    results = [bench_batch(model, args, batch_size) for batch_size in args.batch_sizes]
    write_json(args.json, {"benchmark": "generate", "args": vars(args), "results": results})


if __name__ == "__main__":
    main()
