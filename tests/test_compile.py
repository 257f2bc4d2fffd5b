"""``--torch_compile`` for every family: the Transformer, the Transformer LM and BERT capture their training
forward and loss as one graph (``torch._dynamo.explain``), and every family's compiled forward and backward give
eager mode's loss and gradients (aot_eager: the graphs inductor would compile, without its slow code generation),
all with dynamo's default settings, which compiling leaves as they were."""

from __future__ import annotations

import pytest
import torch
from model_inputs import model_inputs

from hf_seqmodels import registry
from hf_seqmodels.training.bert.trainer import masked_lm_positions
from hf_seqmodels.training.core.compiling import can_compile_fullgraph, compile_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: the families whose training step compiles with fullgraph=True, and the head their trainer trains
ONE_GRAPH = {"transformer": "AutoModelForSeq2SeqLM", "transformer_lm": "AutoModelForCausalLM",
             "bert": "AutoModelForPreTraining"}
#: every family's main head, as its trainer calls it
ALL_FAMILIES = ("nnlm", "rnn", "rnn_seq2seq", "transformer", "transformer_lm", "bert", "textcnn", "bilstm_crf")


def training_inputs(family, head, config) -> dict:
    """The family's test inputs shaped as its trainer's batches: the second row padded at its end (mask 0,
    label -100) and BERT's logits computed at the masked positions only, which the batches carry (the pretraining
    trainer's default)."""
    inputs = model_inputs(family, config, head, batch_size=2, seq_length=8)
    for key in ("attention_mask",):
        if key in inputs:
            inputs[key][1, -2:] = 0
    if family.task_of(head) in ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForPreTraining"):
        inputs["labels"][1, -2:] = -100
    if family.task_of(head) == "AutoModelForPreTraining":
        with_masked_positions(inputs)
    return inputs


def with_masked_positions(inputs: dict) -> dict:
    """BERT's pretraining ``inputs`` with the masked positions the trainer's batches carry."""
    inputs["masked_positions_only"] = True
    inputs["masked_lm_positions"] = masked_lm_positions(inputs["labels"])
    return inputs


def main_head(family, task: str | None = None):
    heads = {auto_class.__name__: model for auto_class, model in family.heads.items()}
    return heads[task] if task else family.main_head


@pytest.mark.parametrize("name", list(ONE_GRAPH))
def test_the_transformer_families_compile_their_training_step_without_a_graph_break(name):
    family = registry.family_named(name)
    config = family.tiny_config()
    model = main_head(family, ONE_GRAPH[name])(config).train()
    assert can_compile_fullgraph(model)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(**training_inputs(family, type(model), config))
    reasons = "\n".join(str(reason.reason) for reason in explained.break_reasons)
    assert explained.graph_break_count == 0, reasons
    assert explained.graph_count == 1


@pytest.mark.parametrize("name", ALL_FAMILIES)
def test_every_family_compiled_gives_the_eager_loss_and_gradients(name):
    family = registry.family_named(name)
    config = family.tiny_config()
    head = main_head(family, ONE_GRAPH.get(name))
    torch.manual_seed(0)
    model = head(config).eval()  # no dropout: the two runs draw no random numbers
    inputs = training_inputs(family, head, config)
    eager_loss = model(**inputs).loss
    eager_loss.backward()
    eager_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=can_compile_fullgraph(model))
    loss = compiled(**inputs).loss
    loss.backward()
    torch.testing.assert_close(loss, eager_loss)
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads.keys() == eager_grads.keys()
    for n, grad in grads.items():
        torch.testing.assert_close(grad, eager_grads[n], msg=lambda m, n=n: f"{n}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ONE_GRAPH))
def test_batches_of_varying_shapes_compile_at_most_twice(name):
    """The first batch compiles for its shapes; the second, of other shapes, once more with them dynamic; then the
    graph serves every batch (translation batches vary in rows and lengths, BERT's in masked positions too)."""
    family = registry.family_named(name)
    config = family.tiny_config()
    head = main_head(family, ONE_GRAPH[name])
    model = head(config).train()
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    for batch_size, length in ((2, 8), (3, 16), (5, 11)):
        inputs = model_inputs(family, config, head, batch_size=batch_size, seq_length=length)
        inputs["attention_mask"][0, -3:] = 0
        if family.task_of(head) == "AutoModelForPreTraining":
            with_masked_positions(inputs)
        compiled(**inputs).loss.backward()
    assert counters["stats"]["unique_graphs"] == 2


def test_compiling_a_step_leaves_dynamos_settings_as_they_were():
    """``compile_model`` and the compiled BERT pretraining steps (logits at the batches' masked positions, and at
    every position) change no process-wide dynamo setting: the user's later code compiles as it would have."""
    family = registry.family_named("bert")
    config = family.tiny_config()
    model = main_head(family, ONE_GRAPH["bert"])(config).train()
    inputs = training_inputs(family, type(model), config)
    everywhere = {k: v for k, v in inputs.items() if k != "masked_lm_positions"} | {"masked_positions_only": False}
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=False):  # the default, whatever ran before
        before = torch._dynamo.config.get_config_copy()
        compiled = compile_model(model, model, backend="aot_eager")  # one graph: a break would raise
        compiled(**inputs).loss.backward()
        compiled(**everywhere).loss.backward()
        assert torch._dynamo.config.get_config_copy() == before
