"""The optimizer of the training loop: weight decay on what transformers' Trainer decays, nothing else."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForPreTraining, Trainer

from hf_seqmodels.registry import FAMILY_DESCRIPTIONS, family_named
from hf_seqmodels.training.core.arguments import EngineArguments
from hf_seqmodels.training.core.optimizers import build_optimizer, decay_parameter_names

HEADS = [(family, head) for family in FAMILY_DESCRIPTIONS for head in family.heads.values()]


def tiny(family_name: str, auto_class) -> torch.nn.Module:
    family = family_named(family_name)
    return family.heads[auto_class](family.tiny_config())


@pytest.mark.parametrize(("family", "head"), HEADS, ids=[head.__name__ for _, head in HEADS])
def test_the_decayed_parameters_are_transformers_trainers(family, head):
    model = head(family.tiny_config())
    ours = decay_parameter_names(model)
    trainers = set(Trainer.get_decay_parameter_names(None, model))  # may name a shared weight twice
    assert sorted(ours) == sorted(name for name, _ in model.named_parameters() if name in trainers)
    assert not [name for name in ours if "bias" in name]


def test_weight_decay_spares_biases_and_layer_norms_and_decays_embeddings(tmp_path):
    model = tiny("transformer_lm", AutoModelForCausalLM)
    names = set(decay_parameter_names(model))
    norms = [n for n, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and not [n for n in names if any(n.startswith(norm + ".") for norm in norms)]
    assert any("embed_tokens" in n for n in names)  # embeddings decay, as in transformers' Trainer
    for optim in ("adamw_torch", "adamw_torch_fused", "sgd"):
        args = EngineArguments(output_dir=str(tmp_path), optim=optim, learning_rate=0.1, weight_decay=0.5,
                               adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        optimizer = build_optimizer(model, args)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)  # no gradient: only the decay moves a parameter
        optimizer.step()
        moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
        assert moved == names, optim
        assert sorted(g["weight_decay"] for g in optimizer.param_groups) == [0.0, 0.5]


def test_no_weight_decay_keeps_the_two_groups_at_zero(tmp_path):
    model = tiny("bert", AutoModelForPreTraining)
    args = EngineArguments(output_dir=str(tmp_path), optim="adamw_torch", learning_rate=0.1, weight_decay=0.0,
                           adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8)
    optimizer = build_optimizer(model, args)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.0, 0.0]
    assert [len(g["params"]) for g in optimizer.param_groups] == [
        len(build_optimizer(model, dataclasses.replace(args, weight_decay=0.1)).param_groups[i]["params"])
        for i in range(2)]
