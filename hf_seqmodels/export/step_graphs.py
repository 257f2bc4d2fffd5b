"""The graphs that generation runs without torch, as modules that take and return the decoding state as plain
tensors (optimum's ``encoder_model`` / ``decoder_model`` / ``decoder_with_past`` split).

Every graph follows one naming contract, which :class:`~hf_seqmodels.export.OnnxGenerator` relies on:

* the token inputs are ``input_ids`` (decoder-only) or ``decoder_input_ids`` (encoder-decoder), ``(B, T)``;
* the state read is ``past.<name>``, the state written ``present.<name>``, batch-first; a ``past.<name>``
  that a graph does not return (the Transformer's cross-attention keys) stays as it was;
* every other output (``encoder_hidden_states``, ``attention_keys``) is context: fixed for the whole decoding,
  fed to every later graph that takes an input of that name, as are ``attention_mask`` (decoder-only: the
  mask of everything read so far, ``(B, past + T)``) and ``encoder_attention_mask`` (the source's).

Per family (``L`` layers, ``H`` heads, ``d`` head size, ``S`` source length, ``P`` cached positions):

* recurrent LM and NNLM: ``step`` only, ``(input_ids (B, T), attention_mask (B, P + T), past.0 [, past.1]) ->
  logits (B, T, V), present.*``; the prompt is read by one call (the recurrence is a ``Scan``). The state is
  ``(B, L, hidden)`` from zeros for the RNN, LSTM (``(h, c)``), GRU and peephole LSTM, with or without a
  character encoder; for the NNLM the window of the last ``n - 1`` token ids ``(B, n - 1)`` (int64), from
  ``n - 1`` copies of the pad id. ``generation.json``'s ``initial_state`` gives each state tensor's shape
  after the batch axis, dtype and fill value.
* Transformer LM: ``prefill`` ``(input_ids, attention_mask) -> logits, present.<i>.key/value (B, H, T, d)``,
  ``step`` the same from ``past.<i>.key/value (B, H, P, d)`` with ``input_ids (B, 1)``.
* Transformer encoder-decoder: ``encoder`` ``(input_ids, attention_mask) -> encoder_hidden_states``;
  ``prefill`` ``(decoder_input_ids, encoder_hidden_states, encoder_attention_mask) -> logits,
  present.<i>.decoder.key/value, present.<i>.encoder.key/value`` (cross-attention keys, computed once);
  ``step`` ``(decoder_input_ids (B, 1), encoder_attention_mask, past.*) -> logits, present.<i>.decoder.*``.
* RNN encoder-decoder: ``encoder`` ``(input_ids, attention_mask) -> encoder_hidden_states, attention_keys,
  present.0 [, present.1] [, present.input_feed]`` (the bridge's initial state); ``step``
  ``(decoder_input_ids, encoder_hidden_states, attention_keys, encoder_attention_mask, past.*) -> logits,
  present.*``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache


@dataclass
class StepGraph:
    """One graph to export: ``module(*inputs.values())`` returns the tensors named ``output_names``.
    ``static``: ``{input name: dimensions kept at the example's size}`` (all others are dynamic)."""

    role: str  # "encoder", "prefill" or "step"
    module: nn.Module
    inputs: dict[str, torch.Tensor]
    output_names: list[str]
    static: dict[str, tuple[int, ...]]

    @property
    def file(self) -> str:
        return {"encoder": "encoder_model.onnx", "prefill": "decoder_model.onnx",
                "step": "decoder_with_past.onnx"}[self.role]


def _cache_of(output):
    from ..models.cache_naming import output_cache

    return output_cache(output)


def _kv(cache: DynamicCache) -> list[torch.Tensor]:
    """``[keys_0, values_0, keys_1, ...]`` of a ``DynamicCache``, each ``(B, H, P, d)``."""
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def _pairs(flat: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(zip(flat[0::2], flat[1::2], strict=True))


class RecurrentLMStep(nn.Module):
    """``(input_ids (B, T), attention_mask (B, P + T), *state) -> (logits (B, T, V), *new state)`` of a causal LM
    whose cache is a :class:`RecurrentState` (the RNN LMs, the NNLM); padded tokens leave the state as it was."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *state: torch.Tensor):
        from ..models.cache_naming import cache_field
        from ..models.state_cache import RecurrentState

        time = input_ids.shape[1]
        mask = attention_mask.narrow(1, attention_mask.shape[1] - time, time)  # (B, T): no guard relating P to T
        out = self.model(input_ids=input_ids, attention_mask=mask, **cache_field(RecurrentState(state, 1)),
                         use_cache=True, return_dict=True)
        return (out.logits, *_cache_of(out).tensors)


class CausalLMWithPast(nn.Module):
    """``(input_ids (B, T), attention_mask (B, P + T), *past) -> (logits (B, T, V), *present)`` of the
    Transformer LM; ``past``/``present`` are ``key, value`` per layer, ``(B, H, P | P + T, d)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *past: torch.Tensor):
        from ..models.cache_naming import cache_field

        cache = DynamicCache(_pairs(past)) if past else None
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True, return_dict=True,
                         **cache_field(cache))
        return (out.logits, *_kv(_cache_of(out)))


class TransformerEncoderGraph(nn.Module):
    """``(input_ids (B, S), attention_mask (B, S)) -> encoder_hidden_states (B, S, d_model)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids, attention_mask, return_dict=True).last_hidden_state


class TransformerDecoderFirst(nn.Module):
    """``(decoder_input_ids (B, T), encoder_hidden_states, encoder_attention_mask) -> (logits, *self k/v,
    *cross k/v)``: the first decoding call, which also projects the encoder output once."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask):
        out = self.model(decoder_input_ids=decoder_input_ids, encoder_outputs=(encoder_hidden_states,),
                         attention_mask=encoder_attention_mask, use_cache=True, return_dict=True)
        cache = _cache_of(out)
        return (out.logits, *_kv(cache.self_attention_cache), *_kv(cache.cross_attention_cache))


class TransformerDecoderWithPast(nn.Module):
    """``(decoder_input_ids (B, 1), encoder_attention_mask (B, S), *self k/v, *cross k/v) -> (logits, *self
    k/v)``; the cross-attention keys and values come from :class:`TransformerDecoderFirst`."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.num_layers = model.config.decoder_layers

    def forward(self, decoder_input_ids, encoder_attention_mask, *past):
        from ..models.cache_naming import cache_field

        n = 2 * self.num_layers
        cache = EncoderDecoderCache(DynamicCache(_pairs(past[:n])), DynamicCache(_pairs(past[n:])))
        cross_keys = past[n]  # (B, H, S, d): the encoder output is read only for its shape
        memory = cross_keys.new_zeros(cross_keys.shape[0], cross_keys.shape[2], self.model.config.d_model)
        out = self.model(decoder_input_ids=decoder_input_ids, encoder_outputs=(memory,),
                         attention_mask=encoder_attention_mask, use_cache=True, return_dict=True,
                         **cache_field(cache))
        return (out.logits, *_kv(_cache_of(out).self_attention_cache))


class RNNSeq2SeqEncoderGraph(nn.Module):
    """``(input_ids, attention_mask) -> (encoder_hidden_states (B, S, M), [attention_keys (B, S, A)], *initial
    state (B, L, H), [input_feed (B, H)])``: the encoder, the attention's projection of its outputs and the
    bridge, as :class:`RNNSeq2SeqModel` computes them before the first target token."""

    def __init__(self, model: nn.Module, with_keys: bool):
        super().__init__()
        self.model, self.with_keys = model.model, with_keys

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        encoded = self.model.encoder(input_ids, attention_mask, return_dict=True)
        memory = encoded.last_hidden_state
        outputs = [memory]
        if self.with_keys:
            outputs.append(self.model.decoder.attention.prepare(memory))
        outputs.extend(self.model.bridge(encoded.final_state))
        if self.model.decoder.input_feeding:
            outputs.append(memory.new_zeros(memory.shape[0], self.model.config.hidden_size))  # h̃_0 = 0
        return tuple(outputs)


class RNNSeq2SeqDecoderStep(nn.Module):
    """``(decoder_input_ids (B, T), encoder_hidden_states, [attention_keys], encoder_attention_mask, *state,
    [input_feed]) -> (logits (B, T, V), *state, [input_feed])``: :class:`AttentionDecoder` and the output layer."""

    def __init__(self, model: nn.Module, with_keys: bool, num_state: int):
        super().__init__()
        self.head, self.with_keys, self.num_state = model, with_keys, num_state

    def forward(self, decoder_input_ids, memory, *rest):
        base = self.head.model
        keys, rest = (rest[0], rest[1:]) if self.with_keys else (memory, rest)
        if base.decoder.attention is None:
            keys = None
        mask, state, feed = rest[0].bool(), rest[1 : 1 + self.num_state], rest[1 + self.num_state :]
        decoded = base.decoder(decoder_input_ids, memory, mask, tuple(state), feed[0] if feed else None, keys)
        hidden = self.head.dropout(decoded.outputs)
        if self.head.output_projection is not None:
            hidden = self.head.output_projection(hidden)
        new_feed = (decoded.input_feed,) if feed else ()
        return (self.head.lm_head(hidden), *decoded.state, *new_feed)


def _ids(batch: int, length: int, vocab_size: int = 5) -> torch.Tensor:
    """Example ids ``(batch, length)``, distinct where the vocabulary allows."""
    return torch.arange(batch * length).reshape(batch, length) % vocab_size


def _source_vocab(config) -> int:
    return config.source_vocab_size if getattr(config, "source_vocab_size", None) else config.vocab_size


def initial_recurrent_state(model: nn.Module, batch_size: int) -> tuple[torch.Tensor, ...]:
    """The state a recurrent causal LM starts from, ``batch_size`` rows: the NNLM's window of pad ids
    ``(B, n - 1)`` (its ``initial_context``), the RNN LMs' zeros ``(B, L, hidden)`` (two tensors for the LSTMs)."""
    if hasattr(model, "initial_context"):
        return (model.initial_context(batch_size, model.device),)
    return model.model.encoder.initial_state(batch_size, model.lm_head.weight)


def recurrent_lm_graphs(model: nn.Module) -> tuple[list[StepGraph], dict]:
    """The one graph of a recurrent LM or the NNLM and its initial state (``extra`` of the spec:
    ``{"initial_state": {name: {"shape", "dtype", "fill"}}}``, the shape without the batch axis)."""
    state = tuple(s.clone() for s in initial_recurrent_state(model, 2))  # distinct tensors: distinct inputs
    names = [str(i) for i in range(len(state))]
    inputs = {"input_ids": _ids(2, 3, model.config.vocab_size), "attention_mask": torch.ones(2, 5, dtype=torch.long),
              **{f"past.{n}": s for n, s in zip(names, state, strict=True)}}
    graph = StepGraph("step", RecurrentLMStep(model), inputs, ["logits", *(f"present.{n}" for n in names)],
                      {f"past.{n}": tuple(range(1, s.dim())) for n, s in zip(names, state, strict=True)})
    initial = {n: {"shape": list(s.shape[1:]), "dtype": str(s.dtype).removeprefix("torch."),
                   "fill": s.flatten()[0].item()} for n, s in zip(names, state, strict=True)}
    return [graph], {"initial_state": initial}


def transformer_lm_graphs(model: nn.Module) -> tuple[list[StepGraph], dict]:
    """``prefill`` (the prompt, no past) and ``step`` (one token after ``P`` cached positions)."""
    names = [f"{i}.{kind}" for i in range(model.config.decoder_layers) for kind in ("key", "value")]
    with torch.no_grad():
        first = CausalLMWithPast(model)(_ids(2, 3, model.config.vocab_size), torch.ones(2, 3, dtype=torch.long))
    prefill = StepGraph("prefill", CausalLMWithPast(model),
                        {"input_ids": _ids(2, 3, model.config.vocab_size), "attention_mask": torch.ones(2, 3, dtype=torch.long)},
                        ["logits", *(f"present.{n}" for n in names)], {})
    past = {f"past.{n}": t for n, t in zip(names, first[1:], strict=True)}
    step = StepGraph("step", CausalLMWithPast(model),
                     {"input_ids": _ids(2, 1, model.config.vocab_size), "attention_mask": torch.ones(2, 4, dtype=torch.long), **past},
                     ["logits", *(f"present.{n}" for n in names)],
                     {"input_ids": (1,), **{n: (1, 3) for n in past}})
    return [prefill, step], {}


def transformer_seq2seq_graphs(model: nn.Module) -> tuple[list[StepGraph], dict]:
    """``encoder``, ``prefill`` (first target token, projects the encoder output) and ``step``."""
    layers = range(model.config.decoder_layers)
    self_names = [f"{i}.decoder.{k}" for i in layers for k in ("key", "value")]
    cross_names = [f"{i}.encoder.{k}" for i in layers for k in ("key", "value")]
    source, mask = _ids(2, 5, _source_vocab(model.config)), torch.ones(2, 5, dtype=torch.long)
    with torch.no_grad():
        memory = TransformerEncoderGraph(model)(source, mask)
        first = TransformerDecoderFirst(model)(_ids(2, 2, model.config.vocab_size), memory, mask)
    encoder = StepGraph("encoder", TransformerEncoderGraph(model), {"input_ids": source, "attention_mask": mask},
                        ["encoder_hidden_states"], {})
    prefill = StepGraph("prefill", TransformerDecoderFirst(model),
                        {"decoder_input_ids": _ids(2, 2, model.config.vocab_size), "encoder_hidden_states": memory,
                         "encoder_attention_mask": mask},
                        ["logits", *(f"present.{n}" for n in self_names + cross_names)],
                        {"encoder_hidden_states": (2,)})
    past = {f"past.{n}": t for n, t in zip(self_names + cross_names, first[1:], strict=True)}
    step = StepGraph("step", TransformerDecoderWithPast(model),
                     {"decoder_input_ids": _ids(2, 1, model.config.vocab_size), "encoder_attention_mask": mask, **past},
                     ["logits", *(f"present.{n}" for n in self_names)],
                     {"decoder_input_ids": (1,), **{n: (1, 3) for n in past}})
    return [encoder, prefill, step], {}


def rnn_seq2seq_graphs(model: nn.Module) -> tuple[list[StepGraph], dict]:
    """``encoder`` (memory, attention keys, the bridge's state) and ``step`` (one target token)."""
    base = model.model
    source, mask = _ids(2, 5, _source_vocab(model.config)), torch.ones(2, 5, dtype=torch.long)
    attention = base.decoder.attention
    with torch.no_grad():
        memory = base.encoder(source, mask, return_dict=True).last_hidden_state
        with_keys = attention is not None and attention.prepare(memory) is not memory
    num_state = base.decoder.rnn.num_state_tensors
    state_names = [str(i) for i in range(num_state)] + (["input_feed"] if base.decoder.input_feeding else [])
    context = ["encoder_hidden_states"] + (["attention_keys"] if with_keys else [])
    encoder_module = RNNSeq2SeqEncoderGraph(model, with_keys)
    encoder = StepGraph("encoder", encoder_module, {"input_ids": source, "attention_mask": mask},
                        [*context, *(f"present.{n}" for n in state_names)], {})
    with torch.no_grad():
        encoded = encoder_module(source, mask)
    step_inputs = {"decoder_input_ids": _ids(2, 1, model.config.vocab_size), **dict(zip(context, encoded, strict=False)),
                   "encoder_attention_mask": mask,
                   **{f"past.{n}": t for n, t in zip(state_names, encoded[len(context):], strict=True)}}
    static = {"decoder_input_ids": (1,), **{f"past.{n}": tuple(range(1, t.dim())) for n, t in
                                            zip(state_names, encoded[len(context):], strict=True)},
              **{name: (2,) for name in context}}
    step = StepGraph("step", RNNSeq2SeqDecoderStep(model, with_keys, num_state), step_inputs,
                     ["logits", *(f"present.{n}" for n in state_names)], static)
    return [encoder, step], {}


#: ``{builder name: (kind, builder)}``; a generative head names its builder in its ``export_graphs`` attribute
GRAPH_BUILDERS = {
    "recurrent_lm": ("decoder-only", recurrent_lm_graphs),
    "transformer_lm": ("decoder-only", transformer_lm_graphs),
    "transformer_seq2seq": ("encoder-decoder", transformer_seq2seq_graphs),
    "rnn_seq2seq": ("encoder-decoder", rnn_seq2seq_graphs),
}


def generation_graphs(model: nn.Module) -> tuple[str, list[StepGraph], dict] | None:
    """``(kind, graphs, extra spec fields)`` for a generative head (every cell type, character encoder and
    attention of the package), from the builder its class names (``export_graphs``, a key of
    :data:`GRAPH_BUILDERS`); None for the heads that do not generate. A generative head that names no builder
    is a ValueError, never a silent export without generation."""
    name = getattr(type(model), "export_graphs", None)
    if name is None:
        if model.can_generate():
            raise ValueError(f"{type(model).__name__} generates, but has no decoding graphs to export: give the "
                             f"class an `export_graphs` attribute naming one of {sorted(GRAPH_BUILDERS)}, or add "
                             "a builder in hf_seqmodels/export/step_graphs.py.")
        return None
    if name not in GRAPH_BUILDERS:
        raise ValueError(f"{type(model).__name__}.export_graphs={name!r}: expected one of {sorted(GRAPH_BUILDERS)}")
    kind, build = GRAPH_BUILDERS[name]
    return (kind, *build(model))
