"""Training throughput of the LSTM language model against the same network written in plain torch.

Both sides train on the same token stream with truncated back-propagation through time (TBPTT):
the stream is cut into ``bptt``-token windows, each window is one step (forward, cross-entropy on
the next token, backward, SGD step) and the final state is carried into the next window, detached.

* ours: ``RNNForCausalLM(input_ids=x, past_key_values=state, shift_labels=y)``;
* reference: ``nn.Embedding -> nn.LSTM(batch_first=True) -> nn.Linear`` and ``F.cross_entropy``,
  holding a copy of our weights (checked to give the same loss before timing); on a GPU ``nn.LSTM`` runs
  cuDNN's fused kernels, so this is the hand-written cuDNN loop.

Both run on ``--device`` (``auto``: the GPU when torch sees one). Sizes: the defaults below, or ``--preset
zaremba-medium``, the medium model of Zaremba et al. (2014) on the Penn Treebank: vocabulary 10000, 650 units
(embedding and hidden), 2 layers, batch 20, bptt 35 (dropout 0 here, on both sides: the timing compares the
same work; the paper trains with 0.5). On CUDA the script also samples the GPU's utilisation while each
contender's timed rounds run (``pynvml`` when it imports, else ``nvidia-smi`` polled in a thread; the driver's
figure is the share of time at least one kernel ran) and prints its mean per contender; on a CPU it says n/a.
A round should last well over the driver's sampling period (1/6 s to 1 s) for that figure to mean much:
``--steps`` sets the steps per round.

Target: tokens/s of ours / tokens/s of the reference >= 0.95.

    python -m benchmarks.bench_lstm_training
    python -m benchmarks.bench_lstm_training --hidden-size 650 --batch-size 20 --repeats 7 --json out.json
    python -m benchmarks.bench_lstm_training --preset zaremba-medium --steps 100  # on a GPU
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.models.cache_naming import cache_field, output_cache

from .common import (
    GPUUtilization,
    add_common_args,
    add_device_arg,
    device_name,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    resolve_device,
    setup,
    synchronizer,
    write_json,
)

TARGET = 0.95
OURS, REFERENCE = "RNNForCausalLM", "plain torch"
PRESETS = {  # sizes; the command line's own values win
    "default": dict(vocab_size=10000, embedding_size=256, hidden_size=256, num_layers=2, batch_size=32, bptt=35),
    "zaremba-medium": dict(vocab_size=10000, embedding_size=650, hidden_size=650, num_layers=2, batch_size=20,
                           bptt=35),
}


class ReferenceLSTMLM(nn.Module):
    """The textbook LSTM language model (pytorch/examples word_language_model), batch-first."""

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(embedding_size, hidden_size, num_layers,
                            dropout=dropout if num_layers > 1 else 0.0, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, input_ids: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None):
        """``input_ids`` ``(B, T)`` -> logits ``(B, T, V)`` and ``(h, c)``, each ``(L, B, H)``."""
        outputs, state = self.lstm(self.dropout(self.embedding(input_ids)), state)  # (B, T, H)
        return self.head(self.dropout(outputs)), state

    @classmethod
    def copy_of(cls, model: RNNForCausalLM) -> ReferenceLSTMLM:
        """A reference network holding the same weights as ``model``."""
        config = model.config
        reference = cls(config.vocab_size, config.embedding_size, config.hidden_size,
                        config.num_hidden_layers, config.hidden_dropout_prob)
        reference.embedding.load_state_dict(model.model.embed_tokens.state_dict())
        reference.lstm.load_state_dict(model.model.encoder.rnn.state_dict())
        reference.head.load_state_dict(model.lm_head.state_dict())
        return reference


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), default="default",
                        help="sizes (zaremba-medium: 650 units, 2 layers, batch 20, bptt 35); the options below override")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--embedding-size", type=int)
    parser.add_argument("--hidden-size", type=int)
    parser.add_argument("--num-layers", type=int)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--bptt", type=int, help="tokens per TBPTT window (one training step)")
    parser.add_argument("--steps", type=int, default=4, help="training steps per timed round")
    parser.add_argument("--lr", type=float, default=1.0)
    add_device_arg(parser)
    add_common_args(parser, repeats=5)
    args = parser.parse_args(argv)
    for name, value in PRESETS[args.preset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def make_stream(args: argparse.Namespace, device: torch.device) -> torch.Tensor:
    """Random token stream ``(batch, steps * bptt + 1)``: one round of TBPTT windows plus the last target."""
    generator = torch.Generator().manual_seed(args.seed)
    stream = torch.randint(4, args.vocab_size, (args.batch_size, args.steps * args.bptt + 1), generator=generator)
    return stream.to(device)


def make_windows(stream: torch.Tensor, bptt: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Cut ``stream`` into contiguous ``(inputs, targets)`` pairs ``(B, bptt)``, targets shifted by one token.

    Cut once, outside the timed loop, as a data loader would hand them over.
    """
    return [
        (stream[:, start : start + bptt].contiguous(), stream[:, start + 1 : start + bptt + 1].contiguous())
        for start in range(0, stream.shape[1] - 1, bptt)
    ]


def train_ours(model: RNNForCausalLM, optimizer: torch.optim.Optimizer, batches: list) -> float:
    """One round of TBPTT steps through ``RNNForCausalLM``; returns the last loss."""
    state = None
    for inputs, targets in batches:
        out = model(input_ids=inputs, **cache_field(state), shift_labels=targets, use_cache=True)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state = output_cache(out).detach()
    return out.loss.item()


def train_reference(model: ReferenceLSTMLM, optimizer: torch.optim.Optimizer, batches: list) -> float:
    """The same round of TBPTT steps through the plain torch network; returns the last loss."""
    state = None
    for inputs, targets in batches:
        logits, state = model(inputs, state)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state = tuple(s.detach() for s in state)
    return loss.item()


def check_same_loss(ours: RNNForCausalLM, reference: ReferenceLSTMLM, batches: list) -> float:
    """Loss of the first window on both sides, dropout off; stop if they differ (the timing would be meaningless)."""
    inputs, targets = batches[0]
    ours.eval()
    reference.eval()
    with torch.no_grad():
        loss_ours = ours(input_ids=inputs, shift_labels=targets).loss
        logits, _ = reference(inputs)
        loss_ref = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    ours.train()
    reference.train()
    tolerance = 1e-4 if loss_ours.device.type == "cuda" else 1e-5  # GPU kernels sum in other orders
    if not torch.allclose(loss_ours, loss_ref, rtol=tolerance, atol=1e-6):
        raise SystemExit(f"FAIL: the two networks disagree (loss {loss_ours.item()} vs {loss_ref.item()})")
    return loss_ours.item()


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup(args)
    device = resolve_device(args.device)
    hardware = device_name(device)
    config = RNNConfig(
        vocab_size=args.vocab_size, cell_type="lstm", embedding_size=args.embedding_size,
        hidden_size=args.hidden_size, num_hidden_layers=args.num_layers,
        hidden_dropout_prob=args.dropout, tie_word_embeddings=False,
    )
    ours = RNNForCausalLM(config).train()
    reference = ReferenceLSTMLM.copy_of(ours).to(device).train()
    ours = ours.to(device)
    batches = make_windows(make_stream(args, device), args.bptt)
    loss = check_same_loss(ours, reference, batches)
    print(f"same weights, same first-window loss on both sides: {loss:.4f}")

    opt_ours = torch.optim.SGD(ours.parameters(), lr=args.lr)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=args.lr)
    contenders = {OURS: lambda: train_ours(ours, opt_ours, batches),
                  REFERENCE: lambda: train_reference(reference, opt_ref, batches)}
    interleaved_timings(contenders, repeats=0, warmup=args.warmup)  # outside the utilisation's samples
    with GPUUtilization(device) as utilization:  # each round ends with a .item(), so the GPU is done when it ends
        times = interleaved_timings({name: utilization.wrap(name, fn) for name, fn in contenders.items()},
                                    repeats=args.repeats, warmup=0, sync=synchronizer(device))
    busy = utilization.summary()
    tokens = args.batch_size * args.bptt * args.steps
    rows = [[name, statistics.median(t), f"{tokens / statistics.median(t):,.0f}",
             busy[name] if isinstance(busy[name], str) else f"{busy[name]:.0f} %"] for name, t in times.items()]
    print(f"\nLSTM LM training on {hardware} ({device}): V={args.vocab_size} E={args.embedding_size} "
          f"H={args.hidden_size} L={args.num_layers} B={args.batch_size} bptt={args.bptt}, {args.steps} steps x "
          f"{args.repeats} rounds")
    print_table(["model", "median s/round", "tokens/s", f"GPU utilisation ({utilization.source})"], rows)
    # throughput ratio = time ratio reference / ours, paired round by round
    ratio = paired_ratio(times[REFERENCE], times[OURS])
    result = report_ratio("tokens/s ours / reference", ratio, TARGET, higher_is_better=True)
    summary = {"benchmark": "lstm_training", "device": str(device), "device_name": hardware, "args": vars(args),
               "check": {"same_loss": True, "loss": loss}, "times_s": times,
               "tokens_per_s": {name: tokens / statistics.median(t) for name, t in times.items()},
               "gpu_utilization_percent": busy, "gpu_utilization_source": utilization.source, "results": [result]}
    write_json(args.json, summary)
    return summary


if __name__ == "__main__":
    main()
