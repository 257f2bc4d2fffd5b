"""Our LinearChainCRF against pytorch-crf (``torchcrf.CRF``, Kurniawan), the CRF layer users would pick.

Both get the same start, end and transition scores (no constraints, which pytorch-crf does not have)
and the same batch of emissions, tags and right-padded mask; the log-likelihoods and Viterbi paths
are checked to agree before timing. Timed, interleaved in one process:

* training: the batch's summed negative log-likelihood, forward and backward;
* decoding: Viterbi paths of the batch (ours as a ``(batch, time)`` tensor, pytorch-crf as lists);
* max-marginals (ours only; what the tagger's ``logits`` cost on top of Viterbi): informational.

    pip install pytorch-crf   # the reference; not a dependency of the package
    python -m benchmarks.bench_crf
    python -m benchmarks.bench_crf --batch-size 64 --time 50 --num-tags 17 --threads 1 --json out.json
"""

from __future__ import annotations

import argparse
import statistics

import torch

from hf_seqmodels.models.crf import LinearChainCRF

from .common import (
    add_common_args,
    interleaved_timings,
    paired_ratio,
    print_table,
    report_ratio,
    setup,
    write_json,
)


def build_pair(num_tags: int):
    try:
        from torchcrf import CRF
    except ImportError as error:
        raise SystemExit("bench_crf needs the reference: pip install pytorch-crf") from error
    ours = LinearChainCRF(num_tags)
    reference = CRF(num_tags, batch_first=True)
    with torch.no_grad():
        for name in ("start_transitions", "end_transitions", "transitions"):
            getattr(ours, name).copy_(torch.randn_like(getattr(ours, name)))
            getattr(reference, name).copy_(getattr(ours, name))
    return ours, reference


def check_agreement(ours, reference, emissions, tags, mask) -> None:
    with torch.no_grad():
        ours_nll = ours.neg_log_likelihood(emissions, tags, mask).sum()
        reference_nll = -reference(emissions, tags, mask, reduction="sum")
        if not torch.allclose(ours_nll, reference_nll, rtol=1e-4):
            raise SystemExit(f"log-likelihoods differ ({ours_nll} vs {reference_nll}): timings void")
        paths = ours.viterbi_decode(emissions, mask)[0]
        ours_paths = [row[m].tolist() for row, m in zip(paths, mask, strict=True)]
        if ours_paths != reference.decode(emissions, mask):
            raise SystemExit("Viterbi paths differ: timings void")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--time", type=int, default=40, help="padded sentence length")
    parser.add_argument("--num-tags", type=int, default=9, help="9 = CoNLL-2003 BIO tags")
    add_common_args(parser, repeats=7)
    args = parser.parse_args(argv)
    setup(args)
    ours, reference = build_pair(args.num_tags)
    emissions = torch.randn(args.batch_size, args.time, args.num_tags, requires_grad=True)
    tags = torch.randint(0, args.num_tags, (args.batch_size, args.time))
    lengths = torch.randint(args.time // 2, args.time + 1, (args.batch_size,))
    lengths[0] = args.time  # pytorch-crf needs the first time step of every row and one full row
    mask = torch.arange(args.time) < lengths.unsqueeze(1)
    check_agreement(ours, reference, emissions, tags, mask)

    def train(fn):
        def step():
            fn().backward()
            emissions.grad = None
        return step

    decode_emissions = emissions.detach()
    contenders = {
        "ours train": train(lambda: ours.neg_log_likelihood(emissions, tags, mask).sum()),
        "pytorch-crf train": train(lambda: -reference(emissions, tags, mask, reduction="sum")),
        "ours viterbi": lambda: ours.viterbi_decode(decode_emissions, mask),
        "pytorch-crf viterbi": lambda: reference.decode(decode_emissions, mask),
        "ours max-marginals": lambda: ours.max_marginals(decode_emissions, mask),
    }
    times = interleaved_timings(contenders, args.repeats, args.warmup)
    print(f"batch {args.batch_size}, time {args.time}, {args.num_tags} tags, {torch.get_num_threads()} threads")
    print_table(["contender", "median ms"], [[n, 1000 * statistics.median(t)] for n, t in times.items()])
    results = [
        report_ratio("training (NLL fwd+bwd) time ours / pytorch-crf",
                     paired_ratio(times["ours train"], times["pytorch-crf train"]), target=1.5, higher_is_better=False),
        report_ratio("Viterbi time ours / pytorch-crf",
                     paired_ratio(times["ours viterbi"], times["pytorch-crf viterbi"]), target=1.5,
                     higher_is_better=False),
        report_ratio("max-marginals time / our Viterbi", paired_ratio(times["ours max-marginals"],
                                                                      times["ours viterbi"])),
    ]
    out = {"args": vars(args), "median_seconds": {n: statistics.median(t) for n, t in times.items()},
           "ratios": results}
    write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
