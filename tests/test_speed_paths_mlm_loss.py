"""The masked-LM loss reads the labelled rows of the vocabulary logits only (the full logits are still returned)."""

from __future__ import annotations

import torch
from torch import nn

from hf_seqmodels import BertConfig, BertForMaskedLM, BertForPreTraining
from hf_seqmodels.models import modeling_bert

CONFIG = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def batch(generator: torch.Generator):
    ids = torch.randint(4, 50, (3, 10), generator=generator)
    labels = ids.masked_fill(torch.rand(ids.shape, generator=generator) > 0.3, -100)
    labels[0, 0] = 7  # at least one labelled position
    return ids, labels


def test_the_mlm_cross_entropy_reads_the_labelled_rows_only(monkeypatch):
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(**CONFIG))
    ids, labels = batch(torch.Generator().manual_seed(0))
    rows = []
    original = modeling_bert.summed_cross_entropy
    monkeypatch.setattr(modeling_bert, "summed_cross_entropy", lambda x, *a: rows.append(x.shape) or original(x, *a))
    out = model(ids, labels=labels)
    assert out.logits.shape == (3, 10, 50)  # every position's logits are still returned
    assert rows == [((labels != -100).sum().item(), 50)]


def test_the_loss_and_gradients_are_those_of_the_full_cross_entropy():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(**CONFIG)).train()
    ids, labels = batch(torch.Generator().manual_seed(1))
    out = model(ids, labels=labels)
    out.mlm_loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    reference = nn.functional.cross_entropy(model(ids).prediction_logits.flatten(0, 1), labels.flatten())
    reference.backward()
    torch.testing.assert_close(out.mlm_loss, reference, rtol=1e-6, atol=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, dict(model.named_parameters())[name].grad, rtol=1e-5, atol=1e-7, msg=name)


def test_the_sum_over_num_items_in_batch_and_no_labelled_position():
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(**CONFIG))
    ids, labels = batch(torch.Generator().manual_seed(2))
    out = model(ids, labels=labels, num_items_in_batch=torch.tensor(40))
    full = nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), reduction="sum") / 40
    torch.testing.assert_close(out.loss, full, rtol=1e-6, atol=1e-6)
    none = model(ids, labels=torch.full_like(labels, -100), num_items_in_batch=4).loss
    assert none.item() == 0.0
