"""Latency per generated token at batch 1: greedy decoding in onnxruntime over the exported decoding graphs
(:class:`hf_seqmodels.export.OnnxGenerator`) against eager ``model.generate()`` on the same weights.

Models (random weights, small sizes set by the flags): the LSTM language model (``RNNForCausalLM``), the
Transformer language model (``TransformerForCausalLM``, key/value cache) and the attention RNN encoder-decoder
(``RNNSeq2SeqForConditionalGeneration``, bidirectional LSTM encoder, Bahdanau attention). Each is exported once
with :func:`hf_seqmodels.export.export_generation` (which checks greedy equality), then both contenders decode
exactly ``--new-tokens`` tokens (no end-of-sequence token) after the same prompt or source, interleaved round by
round in this one process. The script stops with exit status 1 if their tokens differ.

Reported per model: milliseconds per generated token for each, and the ratio onnxruntime / eager (below 1:
onnxruntime is faster). Informational, no target. ``--threads`` applies to torch and onnxruntime alike.

Deployment section (``--deploy``, on by default): the LSTM LM and the Transformer LM, trained for
``--train-steps`` steps on the embedded Tiny Shakespeare slice (characters; the last 10 % held out), and BERT
sequence classification trained on a generated task (is the first token in the upper half of the vocabulary?), each run
as eager float32, eager dynamic int8 (``torch.ao.quantization.quantize_dynamic``), ONNX float32 and ONNX
dynamic int8 (``onnxruntime.quantization.quantize_dynamic``) in onnxruntime, and, when ``executorch`` is
importable, as ExecuTorch programs (XNNPACK, batch 1) for the LMs. Reported against eager float32 in the same
run: size (bytes of the weights or program files), forward time on the held-out batches (the ratio), quality
(held-out perplexity or accuracy) and its change; for ExecuTorch, milliseconds per generated token against
eager ``generate()`` at batch 1 (the greedy tokens are compared and their agreement printed).

    python -m benchmarks.bench_export
    python -m benchmarks.bench_export --new-tokens 128 --hidden-size 256 --threads 1 --json out.json
    python -m benchmarks.bench_export --threads 1 --models --train-steps 100 --repeats 3  # deployment only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

import torch

from hf_seqmodels.export import OnnxGenerator, export_generation
from hf_seqmodels.models import (
    RNNConfig,
    RNNForCausalLM,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TransformerForCausalLM,
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
from .export_deployment import DEPLOY_MODELS, run_deployment


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--prompt-length", type=int, default=8, help="prompt (LMs) or source (seq2seq) length")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--models", nargs="*", default=["lstm_lm", "transformer_lm", "attention_seq2seq"],
                        choices=["lstm_lm", "transformer_lm", "attention_seq2seq"],
                        help="models of the onnxruntime decoding comparison (none: skip it)")
    parser.add_argument("--deploy", nargs="*", default=list(DEPLOY_MODELS), choices=list(DEPLOY_MODELS),
                        help="models of the int8 / ExecuTorch deployment comparison (none: skip it)")
    parser.add_argument("--train-steps", type=int, default=200, help="training steps before the deployment section")
    parser.add_argument("--eval-batches", type=int, default=4, help="held-out batches of 8 rows for quality and time")
    parser.add_argument("--no-executorch", action="store_true", help="leave the ExecuTorch rows out")
    add_common_args(parser)
    return parser.parse_args()


def build(name: str, args: argparse.Namespace) -> torch.nn.Module:
    """A random model of the given sizes, in eval mode, with no end-of-sequence token."""
    h, n, v = args.hidden_size, args.num_layers, args.vocab_size
    if name == "lstm_lm":
        config = RNNConfig(vocab_size=v, cell_type="lstm", hidden_size=h, embedding_size=h, num_hidden_layers=n)
        model = RNNForCausalLM(config)
    elif name == "transformer_lm":
        config = TransformerLMConfig(vocab_size=v, d_model=h, decoder_layers=n, decoder_attention_heads=4,
                                     decoder_ffn_dim=4 * h, max_position_embeddings=args.prompt_length
                                     + args.new_tokens + 8)
        model = TransformerForCausalLM(config)
    else:
        config = RNNSeq2SeqConfig(vocab_size=v, hidden_size=h, embedding_size=h, encoder_layers=n, decoder_layers=n,
                                  attention_score="additive", attention_wiring="bahdanau")
        model = RNNSeq2SeqForConditionalGeneration(config)
    model.generation_config.eos_token_id = model.config.eos_token_id = None  # every run decodes N tokens
    return model.eval()


def main() -> int:
    args = parse_args()
    setup(args)
    prompt = torch.randint(4, args.vocab_size, (1, args.prompt_length))
    n, rows, ratios, results = args.new_tokens, [], [], {}
    for name in args.models:
        model = build(name, args)
        with tempfile.TemporaryDirectory() as folder:
            export_generation(model, folder)
            generator = OnnxGenerator(folder, num_threads=args.threads)  # as many threads as torch

            def eager(model=model):
                with torch.no_grad():
                    return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                                          min_new_tokens=n, do_sample=False, num_beams=1)

            def onnx(generator=generator):
                return generator.greedy(prompt.numpy(), max_new_tokens=n)

            if eager().tolist() != onnx().tolist():
                print(f"{name}: onnxruntime and eager tokens differ", file=sys.stderr)
                return 1
            times = interleaved_timings({"eager": eager, "onnxruntime": onnx}, args.repeats, args.warmup)
        per_token = {k: 1000 * statistics.median(t) / n for k, t in times.items()}
        ratio = paired_ratio(times["onnxruntime"], times["eager"])
        rows.append([name, per_token["eager"], per_token["onnxruntime"], ratio])
        results[name] = {"ms_per_token": per_token, "ratio": ratio}
        ratios.append(report_ratio(f"{name}: time per token onnxruntime / eager (batch 1, {n} tokens)", ratio))
    if rows:
        print_table(["model", "eager ms/token", "onnxruntime ms/token", "onnxruntime / eager"], rows)
    deployment = run_deployment(args) if args.deploy else {}
    write_json(args.json, {"args": vars(args), "results": results, "ratios": ratios, "deployment": deployment})
    return 0


if __name__ == "__main__":
    sys.exit(main())
