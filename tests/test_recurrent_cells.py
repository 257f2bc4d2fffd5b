"""The looped recurrent cells: the peephole LSTM (alone, in the recurrent stack and in the RNN models)
and the child-sum Tree-LSTM, against the equations written out by hand and against nn.LSTM."""

from __future__ import annotations

import pytest
import torch
from model_test_utils import left_pad, random_ids, right_pad, run_without_package
from torch import nn
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

import hf_seqmodels  # noqa: F401  (registers the Auto classes)
from hf_seqmodels import (
    RNNConfig,
    RNNForCausalLM,
    RNNForSequenceClassification,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
)
from hf_seqmodels.models.cache_naming import output_cache
from hf_seqmodels.models.recurrent_cells import PeepholeLSTM, PeepholeLSTMCell
from hf_seqmodels.models.recurrent_stack import CELL_TYPES, RecurrentStack, has_cell_state
from hf_seqmodels.models.tree_lstm import ChildSumTreeLSTM, ChildSumTreeLSTMCell

B, T, IN, H = 3, 6, 3, 4  # batch, time, input size, hidden size


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def zero_peepholes(module: nn.Module) -> None:
    with torch.no_grad():
        for name, param in module.named_parameters():
            if "peephole" in name:
                param.zero_()


# --- the peephole LSTM --------------------------------------------------------------------------------


def test_peephole_step_equals_the_course_equations():
    torch.manual_seed(0)
    cell = PeepholeLSTMCell(IN, H)
    x, h, c = torch.randn(B, IN), torch.randn(B, H), torch.randn(B, H)
    W_x, W_h = cell.weight_ih.chunk(4), cell.weight_hh.chunk(4)  # gates i, f, C̃, o
    b = (cell.bias_ih + cell.bias_hh).chunk(4)
    W_ci, W_cf, W_co = cell.weight_peephole.chunk(3)
    with torch.no_grad():
        f = torch.sigmoid(c @ W_cf.T + h @ W_h[1].T + x @ W_x[1].T + b[1])  # f_t = σ(W_f·[C_{t-1}, h_{t-1}, x_t] + b_f)
        i = torch.sigmoid(c @ W_ci.T + h @ W_h[0].T + x @ W_x[0].T + b[0])  # i_t = σ(W_i·[C_{t-1}, h_{t-1}, x_t] + b_i)
        c_new = f * c + i * torch.tanh(h @ W_h[2].T + x @ W_x[2].T + b[2])
        o = torch.sigmoid(c_new @ W_co.T + h @ W_h[3].T + x @ W_x[3].T + b[3])  # o_t = σ(W_o·[C_t, h_{t-1}, x_t] + b_o)
        h_new, c_out = cell(x, (h, c))
    assert torch.allclose(c_out, c_new, atol=1e-6)
    assert torch.allclose(h_new, o * torch.tanh(c_new), atol=1e-6)


def test_peephole_cell_without_peepholes_is_lstm_cell():
    torch.manual_seed(0)
    cell, reference = PeepholeLSTMCell(IN, H), nn.LSTMCell(IN, H)
    reference.load_state_dict(cell.state_dict(), strict=False)
    zero_peepholes(cell)
    x, state = torch.randn(B, IN), (torch.randn(B, H), torch.randn(B, H))
    for ours, theirs in zip(cell(x, state), reference(x, state), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_layer_runner_steps_the_cell():
    """One layer, one direction of PeepholeLSTM is the cell applied step by step."""
    torch.manual_seed(0)
    layer, cell = PeepholeLSTM(IN, H, batch_first=True), PeepholeLSTMCell(IN, H)
    cell.load_state_dict({name.removesuffix("_l0"): p for name, p in layer.state_dict().items()})
    x = torch.randn(B, T, IN)
    outputs, (h_n, c_n) = layer(x)
    state = None
    with torch.no_grad():
        for t in range(T):
            state = cell(x[:, t], state)
            assert torch.allclose(outputs[:, t], state[0], atol=1e-6)
    assert torch.allclose(h_n[0], state[0], atol=1e-6) and torch.allclose(c_n[0], state[1], atol=1e-6)


@pytest.mark.parametrize("num_layers, bidirectional, bias", [(1, False, True), (2, False, True), (2, True, True),
                                                               (2, True, False)])
def test_zero_peepholes_equal_nn_lstm(num_layers, bidirectional, bias):
    torch.manual_seed(0)
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, bias=bias)
    ours = PeepholeLSTM(IN, H, **kw).eval()  # time-major, as nn.LSTM
    reference = nn.LSTM(IN, H, **kw).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    assert not missing and all("peephole" in name for name in unexpected)
    zero_peepholes(ours)
    x = torch.randn(T, B, IN)
    hx = tuple(torch.randn(num_layers * (1 + bidirectional), B, H) for _ in range(2))
    (out, (h, c)), (ref_out, (ref_h, ref_c)) = ours(x, hx), reference(x, hx)
    for a, b in [(out, ref_out), (h, ref_h), (c, ref_c)]:
        assert torch.allclose(a, b, atol=1e-6)


def test_dropout_between_layers_only_in_training():
    torch.manual_seed(0)
    stack = PeepholeLSTM(IN, H, num_layers=2, dropout=0.5, batch_first=True)
    without = PeepholeLSTM(IN, H, num_layers=2, batch_first=True).eval()
    without.load_state_dict(stack.state_dict())
    x = torch.randn(B, T, IN)
    assert not torch.allclose(stack.train()(x)[0], without(x)[0])
    assert torch.equal(stack.eval()(x)[0], without(x)[0])


MASKS = {  # (B, T) rows: right padding, left padding, holes inside, and a row with nothing real
    "right-left-holes": [[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [1, 0, 1, 1, 0, 1]],
    "empty-row": [[1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 1, 0]],
}


@pytest.mark.parametrize("mask_name", sorted(MASKS))
@pytest.mark.parametrize("bidirectional", [False, True])
def test_looped_and_fused_stacks_treat_padding_alike(mask_name, bidirectional):
    """With zero peepholes, the looped stack equals the fused LSTM stack on the same padded batch."""
    torch.manual_seed(0)
    looped = RecurrentStack("peephole_lstm", IN, H, num_layers=2, bidirectional=bidirectional).eval()
    fused = RecurrentStack("lstm", IN, H, num_layers=2, bidirectional=bidirectional).eval()
    fused.rnn.load_state_dict(looped.rnn.state_dict(), strict=False)
    zero_peepholes(looped)
    mask = torch.tensor(MASKS[mask_name], dtype=torch.bool)
    x = torch.randn(B, T, IN)
    state = tuple(torch.randn(B, 2 * (1 + bidirectional), H) for _ in range(2))
    (out, final), (ref_out, ref_final) = looped(x, state, mask), fused(x, state, mask)
    assert torch.allclose(out, ref_out, atol=1e-6)
    assert torch.equal(out[~mask], torch.zeros_like(out[~mask]))
    for a, b in zip(final, ref_final, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    if mask_name == "empty-row":  # a row without real steps keeps its initial state
        assert all(torch.equal(f[1], s[1]) for f, s in zip(final, state, strict=True))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_padded_batch_equals_each_row_alone(bidirectional):
    """With peepholes, padding in any position gives what each row's real steps give alone."""
    torch.manual_seed(0)
    stack = RecurrentStack("peephole_lstm", IN, H, num_layers=2, bidirectional=bidirectional).eval()
    mask = torch.tensor(MASKS["right-left-holes"], dtype=torch.bool)
    x = torch.randn(B, T, IN)
    out, (h, c) = stack(x, mask=mask)
    for row in range(B):
        alone_out, (alone_h, alone_c) = stack(x[row : row + 1, mask[row]])
        assert torch.allclose(out[row, mask[row]], alone_out[0], atol=1e-6)
        assert torch.allclose(h[row], alone_h[0], atol=1e-6) and torch.allclose(c[row], alone_c[0], atol=1e-6)


@pytest.mark.parametrize("cell_type", CELL_TYPES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("output_layers", [False, True])
@pytest.mark.parametrize("batch", [1, B])
def test_a_stack_returns_no_view_with_autograd_history(cell_type, bidirectional, masked, output_layers, batch):
    """FSDP2 hooks the outputs of the stacks it wraps and warns on every one that is a view of another tensor
    (the transposed final state, the LSTM kernel's transposed outputs). With gradients the stack returns
    tensors of their own; without, the same values (not copied: nothing is hooked then)."""
    torch.manual_seed(0)
    stack = RecurrentStack(cell_type, IN, H, num_layers=2, bidirectional=bidirectional)
    x = torch.randn(batch, T, IN, requires_grad=True)
    mask = torch.tensor(MASKS["right-left-holes"], dtype=torch.bool)[:batch] if masked else None

    def returned_tensors():
        returned = stack(x, mask=mask, output_layers=output_layers)
        if output_layers:
            assert returned[0] is returned[2][-1]  # the last layer's outputs are the outputs
        return [returned[0], *returned[1], *(returned[2] if output_layers else ())]

    tensors = returned_tensors()
    assert all(t.requires_grad and t._base is None for t in tensors), [t._base is not None for t in tensors]
    with torch.no_grad():  # torch's LSTM kernel without gradients (oneDNN's inference path) rounds differently
        for got, want in zip(tensors, returned_tensors(), strict=True):
            assert torch.allclose(got, want, rtol=0, atol=1e-6)


def test_peephole_is_a_cell_type_with_a_cell_state():
    assert "peephole_lstm" in CELL_TYPES
    assert RNNConfig.from_preset("peephole-lstm", vocab_size=50).cell_type == "peephole_lstm"
    assert has_cell_state("peephole_lstm") and has_cell_state("lstm") and not has_cell_state("gru")
    assert RecurrentStack("peephole_lstm", IN, H).num_state_tensors == 2


# --- the peephole LSTM in the RNN models --------------------------------------------------------------


def tiny_lm(seed: int = 0, **overrides) -> RNNForCausalLM:
    torch.manual_seed(seed)
    return RNNForCausalLM(RNNConfig.from_preset("tiny", cell_type="peephole_lstm", **overrides)).eval()


def test_models_initialise_peepholes_in_init_range():
    model = tiny_lm(init_range=0.01)
    peepholes = [p for name, p in model.named_parameters() if "peephole" in name]
    assert len(peepholes) == model.config.num_hidden_layers
    for p in peepholes:
        assert p.abs().max() <= 0.01 and p.abs().max() > 0


def test_language_model_loss_state_and_save_load(tmp_path):
    model = tiny_lm().train()
    ids = random_ids(2, 7, 99)
    out = model(ids, labels=ids)
    assert [tuple(t.shape) for t in output_cache(out).tensors] == [(2, 2, 16)] * 2  # (h, c)
    out.loss.backward()
    assert all(p.grad is not None for name, p in model.named_parameters() if "peephole" in name)
    model.eval().save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.cell_type == "peephole_lstm"
    assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_generate_with_cache_equals_without():
    model = tiny_lm()
    ids = random_ids(2, 4, 99)
    kw = dict(max_new_tokens=6, min_new_tokens=6)
    for extra in (dict(do_sample=False), dict(num_beams=3, num_return_sequences=2)):
        assert torch.equal(model.generate(ids, **kw, **extra), model.generate(ids, **kw, **extra, use_cache=False))


def test_left_padded_prompts_generate_what_each_generates_alone():
    model = tiny_lm()
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (2, 5)]
    ids, mask = left_pad(rows)
    kw = dict(max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0)
    batched = model.generate(ids, attention_mask=mask, **kw)
    for i, row in enumerate(rows):
        assert torch.equal(batched[i, -5:], model.generate(row[None], **kw)[0, -5:])


def test_bidirectional_classifier_ignores_padding(tmp_path):
    torch.manual_seed(0)
    config = RNNConfig.from_preset("tiny", cell_type="peephole_lstm", bidirectional=True, num_labels=3)
    model = RNNForSequenceClassification(config).eval()
    rows = [random_ids(1, n, 99, seed=n)[0] for n in (3, 6)]
    ids, mask = right_pad(rows)
    logits = model(ids, attention_mask=mask).logits
    for i, row in enumerate(rows):
        assert torch.allclose(logits[i], model(row[None]).logits[0], atol=1e-5)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded(ids, attention_mask=mask).logits, logits)


def tiny_seq2seq(**overrides) -> RNNSeq2SeqForConditionalGeneration:
    torch.manual_seed(0)
    fields = {"encoder_cell_type": "peephole_lstm", "decoder_cell_type": "peephole_lstm", **overrides}
    return RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset("tiny", **fields)).eval()


@pytest.mark.parametrize("wiring", ["bahdanau", "luong"])
def test_seq2seq_generates_the_same_with_and_without_cache(tmp_path, wiring):
    model = tiny_seq2seq(attention_wiring=wiring)
    src, mask = right_pad([random_ids(1, n, 99, seed=n)[0] for n in (3, 5)])
    kw = dict(attention_mask=mask, max_new_tokens=5, min_new_tokens=5)
    for extra in (dict(do_sample=False), dict(num_beams=3)):
        assert torch.equal(model.generate(src, **kw, **extra), model.generate(src, **kw, **extra, use_cache=False))
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    labels = random_ids(2, 4, 99)
    assert torch.equal(loaded(src, mask, labels=labels).logits, model(src, mask, labels=labels).logits)


def test_copy_bridge_needs_cell_states_on_both_sides():
    model = tiny_seq2seq(encoder_cell_type="lstm", bridge="copy", bidirectional_encoder=False)  # (h, c) -> (h, c)
    assert model(random_ids(1, 4, 99), labels=random_ids(1, 3, 99)).logits.shape == (1, 3, 99)
    with pytest.raises(Exception, match="`bridge`='copy'.*cell state"):  # raised inside a StrictDataclass error
        RNNSeq2SeqConfig.from_preset("tiny", encoder_cell_type="gru", decoder_cell_type="peephole_lstm",
                                     bridge="copy", bidirectional_encoder=False)


@pytest.mark.slow
def test_remote_code_copy_loads_without_the_package(tmp_path):
    """The saved folder carries recurrent_cells.py and recurrent_scan.py next to recurrent_stack.py and runs without
    hf_seqmodels."""
    model = tiny_lm()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "recurrent_cells.py").exists() and (tmp_path / "recurrent_scan.py").exists()
    ids = random_ids(1, 6, 99)
    report = run_without_package(tmp_path, "AutoModelForCausalLM", ids, tmp_path / "logits.safetensors")
    assert report["class"] == "RNNForCausalLM" and report["module"].startswith("transformers_modules")
    assert torch.allclose(report["logits"], model(ids).logits, atol=1e-6)


# --- the child-sum Tree-LSTM -----------------------------------------------------------------------------


def tree_equations(cell: ChildSumTreeLSTMCell, x: torch.Tensor, parents: list[int]):
    """Tai et al.'s equations node by node, children before parents (recursion from the root)."""
    W = cell.input_proj.weight.chunk(4)  # W_i, W_f, W_u, W_o
    b = cell.input_proj.bias.chunk(4)
    U_i, U_u, U_o = cell.hidden_iuo.weight.chunk(3)
    U_f = cell.hidden_f.weight
    states = {}

    def visit(j):
        children = [k for k, p in enumerate(parents) if p == j]
        for k in children:
            visit(k)
        h_tilde = sum((states[k][0] for k in children), torch.zeros(H))
        i = torch.sigmoid(W[0] @ x[j] + U_i @ h_tilde + b[0])
        u = torch.tanh(W[2] @ x[j] + U_u @ h_tilde + b[2])
        o = torch.sigmoid(W[3] @ x[j] + U_o @ h_tilde + b[3])
        c = i * u
        for k in children:
            f_jk = torch.sigmoid(W[1] @ x[j] + U_f @ states[k][0] + b[1])
            c = c + f_jk * states[k][1]
        states[j] = (o * torch.tanh(c), c)

    visit(parents.index(-1))
    return torch.stack([states[j][0] for j in range(len(parents))]), torch.stack([states[j][1] for j in range(len(parents))])


TREES = {  # parent pointers; nodes in any order
    "the cat on the mat sat": [1, 5, 1, 4, 2, -1],
    "star": [-1, 0, 0, 0],
    "deep": [3, 0, 1, -1, 3],
}


@pytest.mark.parametrize("name", sorted(TREES))
def test_tree_lstm_equals_the_equations_node_by_node(name):
    torch.manual_seed(0)
    tree = ChildSumTreeLSTM(IN, H)
    parents = TREES[name]
    x = torch.randn(1, len(parents), IN)
    out = tree(x, torch.tensor([parents]))
    h, c = tree_equations(tree.cell, x[0], parents)
    assert torch.allclose(out.h[0], h, atol=1e-6) and torch.allclose(out.c[0], c, atol=1e-6)
    weights = list(tree.parameters())  # the scatter-added backward pass equals the node-by-node one
    for ours, expected in zip(torch.autograd.grad(out.h.square().sum(), weights),
                              torch.autograd.grad(h.square().sum(), weights), strict=True):
        assert torch.allclose(ours, expected, atol=1e-6)
    root = parents.index(-1)
    assert torch.equal(out.root_h[0], out.h[0, root]) and torch.equal(out.root_c[0], out.c[0, root])


def test_tree_lstm_on_a_chain_is_the_sequential_lstm():
    """Each word's only child is the previous word: the root (last word) state is the LSTM's final state."""
    torch.manual_seed(0)
    tree, lstm = ChildSumTreeLSTM(IN, H), nn.LSTM(IN, H, batch_first=True)
    W_h = lstm.weight_hh_l0.chunk(4)  # i, f, g, o
    with torch.no_grad():
        tree.cell.input_proj.weight.copy_(lstm.weight_ih_l0)
        tree.cell.input_proj.bias.copy_(lstm.bias_ih_l0 + lstm.bias_hh_l0)
        tree.cell.hidden_iuo.weight.copy_(torch.cat([W_h[0], W_h[2], W_h[3]]))
        tree.cell.hidden_f.weight.copy_(W_h[1])
    x = torch.randn(2, T, IN)
    parents = torch.tensor([list(range(1, T)) + [-1]] * 2)
    out = tree(x, parents)
    ref_out, (ref_h, ref_c) = lstm(x)
    assert torch.allclose(out.h, ref_out, atol=1e-6)
    assert torch.allclose(out.root_h, ref_h[0], atol=1e-6) and torch.allclose(out.root_c, ref_c[0], atol=1e-6)


def test_cell_with_padded_children_equals_the_level_by_level_module():
    torch.manual_seed(0)
    tree = ChildSumTreeLSTM(IN, H)
    parents = TREES["star"]  # root 0 with children 1, 2, 3 (leaves)
    x = torch.randn(1, 4, IN)
    out = tree(x, torch.tensor([parents]))
    leaves_h, leaves_c = tree.cell(x[0, 1:], torch.zeros(3, 0, H), torch.zeros(3, 0, H))
    child_h = torch.stack([leaves_h, torch.zeros_like(leaves_h)], dim=0)[None].flatten(1, 2)  # 3 children + 3 padding
    child_c = torch.stack([leaves_c, torch.zeros_like(leaves_c)], dim=0)[None].flatten(1, 2)
    child_mask = torch.tensor([[True] * 3 + [False] * 3])
    root_h, root_c = tree.cell(x[0, :1], child_h + 5 * ~child_mask[..., None], child_c, child_mask)
    assert torch.allclose(out.h[0, 1:], leaves_h, atol=1e-6)
    assert torch.allclose(out.root_h, root_h, atol=1e-6) and torch.allclose(out.root_c, root_c, atol=1e-6)


def test_batch_of_different_trees_equals_each_tree_alone():
    torch.manual_seed(0)
    tree = ChildSumTreeLSTM(IN, H)
    names = sorted(TREES)
    width = max(len(TREES[n]) for n in names)
    parents = torch.full((len(names), width), -1)
    node_mask = torch.zeros(len(names), width, dtype=torch.bool)
    for row, name in enumerate(names):
        parents[row, : len(TREES[name])] = torch.tensor(TREES[name])
        node_mask[row, : len(TREES[name])] = True
    x = torch.randn(len(names), width, IN)
    out = tree(x, parents, node_mask)
    assert torch.equal(out.h[~node_mask], torch.zeros_like(out.h[~node_mask]))
    for row, name in enumerate(names):
        n = len(TREES[name])
        alone = tree(x[row : row + 1, :n], torch.tensor([TREES[name]]))
        assert torch.allclose(out.h[row, :n], alone.h[0], atol=1e-6)
        assert torch.allclose(out.root_h[row], alone.root_h[0], atol=1e-6)
    out.root_h.sum().backward()
    assert tree.cell.hidden_f.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "parents, message",
    [([1, -1, -1], "exactly one root"), ([1, 2, 0], "exactly one root"), ([-1, 2, 3, 1], "cycle"),
     ([-1, 7], r"\[0, 2\)")],
)
def test_bad_trees_raise_clear_errors(parents, message):
    tree = ChildSumTreeLSTM(IN, H)
    with pytest.raises(ValueError, match=message):
        tree(torch.randn(1, len(parents), IN), torch.tensor([parents]))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_peephole_stack_outputs_every_layer_from_the_same_weights(bidirectional):
    torch.manual_seed(0)
    stack = RecurrentStack("peephole_lstm", IN, H, num_layers=3, bidirectional=bidirectional).eval()
    mask = torch.tensor(MASKS["right-left-holes"], dtype=torch.bool)
    x = torch.randn(B, T, IN)
    out, final = stack(x, mask=mask)
    layered_out, layered_final, layers = stack(x, mask=mask, output_layers=True)
    assert len(layers) == 3 and layers[-1] is layered_out
    torch.testing.assert_close(layered_out, out)
    for a, b in zip(layered_final, final, strict=True):
        torch.testing.assert_close(a, b)
    layer_input = x
    for k, layer_output in enumerate(layers):  # layer k alone, as a one-layer PeepholeLSTM with its weights
        one = PeepholeLSTM(layer_input.shape[-1], H, bidirectional=bidirectional, batch_first=True)
        one.load_state_dict({name: getattr(stack.rnn, name.replace("_l0", f"_l{k}")) for name in one.state_dict()})
        layer_input = one(layer_input, mask=mask)[0]
        torch.testing.assert_close(layer_output, layer_input)
