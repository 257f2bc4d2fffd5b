"""How wide each hidden state is.

The rule (every family): ``hidden_states`` = (the input of the first layer, the output of layer 1, ...,
of layer N). The first entry is the embedding output with its own width: ``embedding_size`` (RNN stacks,
both sides of the RNN encoder-decoder, TextCNN), the ``context_size`` concatenated word vectors of the NNLM,
the word vector followed by the character features of a tagger with a character encoder. The layers give
``directions * hidden_size`` (the encoder of the RNN encoder-decoder: ``memory_size``). No projection is
added to make them agree: the models report the tensors their layers compute.

transformers' common tests (``test_hidden_states_output``, the generate dict-output checks) assume every hidden
state is ``config.hidden_size`` wide, as in its built-in models, which project embeddings to the model width.
The registry's test configurations (``Family.tiny_config``: the tiny preset with the family's
``tiny_overrides``) choose sizes where that holds, as transformers' model testers choose theirs; the presets'
own, narrower embeddings are checked against the rule here.
"""

from __future__ import annotations

import pytest
import torch
from conformance_harness import HeadCase, family_cases

from hf_seqmodels.families import Family
from hf_seqmodels.models.char_encoder import CharWordEncoder


def _forward_hidden_states(family: Family, config) -> tuple[dict[str, tuple], object]:
    """``{field: hidden states}`` of the family's main head run with ``output_hidden_states=True``."""
    case = HeadCase(family, next(a for a, m in family.heads.items() if m is family.main_head), family.main_head)
    model = case.model(config)
    with torch.no_grad():
        out = model(**case.inputs(config, labels=False), output_hidden_states=True)
    fields = family.hidden_states(config)
    return {name: out[name] for name in fields}, model


def _embedding_output_width(config, model) -> int:
    """The width of ``hidden_states[0]`` by the rule in the module docstring."""
    width = config.embedding_size * getattr(config, "context_size", 1)
    return width + sum(m.output_size for m in model.modules() if isinstance(m, CharWordEncoder))


def _layer_width(config, field: str) -> int:
    if field == "encoder_hidden_states":
        return config.memory_size
    return (2 if getattr(config, "bidirectional", False) else 1) * config.hidden_size


@pytest.mark.parametrize("family", family_cases("hidden_widths_of_test_config",
                                                lambda f: "hidden_size" in f.common_properties))
def test_test_config_hidden_states_are_as_wide_as_transformers_tests_assume(family: Family):
    """The family's test configuration gives ``hidden_states[0]`` of ``config.hidden_size`` (as
    ``test_hidden_states_output`` checks), and every hidden state of a generative head that wide (as the
    generate dict-output checks do)."""
    config = family.tiny_config()
    states, model = _forward_hidden_states(family, config)
    for field, tensors in states.items():
        assert tensors[0].shape[-1] == config.hidden_size, (field, [t.shape for t in tensors])
        if model.can_generate():
            assert {t.shape[-1] for t in tensors} == {config.hidden_size}, (field, [t.shape for t in tensors])


@pytest.mark.parametrize("family", family_cases("hidden_widths_of_wide_embeddings",
                                                lambda f: hasattr(f.tiny_config(), "embedding_size")))
def test_embedding_output_keeps_its_own_width(family: Family):
    """With word vectors of another width than the layers, ``hidden_states[0]`` is the embedding output at
    its own width and the layers' outputs at theirs (forward, and each step of ``generate``)."""
    hidden = getattr(family.tiny_config(), "hidden_size", 16)
    config = family.tiny_config(embedding_size=hidden + 4)
    states, model = _forward_hidden_states(family, config)
    first = _embedding_output_width(config, model)
    assert first != getattr(config, "hidden_size", None)
    for field, tensors in states.items():
        assert tensors[0].shape[-1] == first, (field, [t.shape for t in tensors])
        if hasattr(config, "hidden_size"):
            assert {t.shape[-1] for t in tensors[1:]} == {_layer_width(config, field)}, (field, [t.shape for t in tensors])
    if not model.can_generate():
        return
    inputs = HeadCase(family, None, type(model)).inputs(config, labels=False)
    inputs = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
    out = model.generate(**inputs, max_new_tokens=2, min_new_tokens=2, do_sample=False, return_dict_in_generate=True,
                         output_hidden_states=True)
    steps = out.decoder_hidden_states if config.is_encoder_decoder else out.hidden_states
    for step in steps:  # (tensors of layer 0..N) per generated token
        assert [t.shape[-1] for t in step] == [config.embedding_size * getattr(config, "context_size", 1)] + [
            config.hidden_size] * (len(step) - 1)
    if config.is_encoder_decoder:
        assert [t.shape[-1] for t in out.encoder_hidden_states] == [config.embedding_size] + [config.memory_size] * (
            len(out.encoder_hidden_states) - 1)
