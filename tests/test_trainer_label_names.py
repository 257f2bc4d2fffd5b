"""Trainer infers the label names of every head from its ``forward`` signature, as for transformers' models."""

from __future__ import annotations

import pytest
import torch
from model_inputs import LABEL_NAMES, model_inputs
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
from transformers.utils import find_labels

import hf_seqmodels  # noqa: F401
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

HEADS = [(family, head) for family in FAMILY_DESCRIPTIONS for head in family.heads.values()]
CAUSAL_LM_HEADS = [(family, head) for family in FAMILY_DESCRIPTIONS for auto_class, head in family.heads.items()
                   if auto_class is AutoModelForCausalLM]


@pytest.mark.parametrize(("family", "head"), HEADS, ids=[head.__name__ for _, head in HEADS])
def test_every_head_names_only_label_arguments(family, head):
    """``shift_labels`` and other loss inputs go through ``**kwargs`` (transformers' causal LMs), so Trainer's
    inferred ``label_names`` are only the labels a batch carries."""
    assert set(find_labels(head)) <= set(LABEL_NAMES), find_labels(head)


@pytest.mark.parametrize(("family", "head"), CAUSAL_LM_HEADS, ids=[head.__name__ for _, head in CAUSAL_LM_HEADS])
def test_trainer_evaluate_reports_eval_loss_with_default_label_names(family, head, tmp_path):
    torch.manual_seed(0)
    config = family.tiny_config()
    model = head(config).eval()
    batch = model_inputs(family, config, head, batch_size=4, seq_length=6)
    rows = [{name: tensor[i] for name, tensor in batch.items()} for i in range(4)]
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=2, use_cpu=True,
                             report_to="none")
    trainer = Trainer(model=model, args=args, eval_dataset=rows)
    metrics = trainer.evaluate()
    assert "eval_loss" in metrics, metrics
    assert trainer.label_names == ["labels"]
    with torch.no_grad():
        expected = torch.stack([model(**{k: v[i : i + 2] for k, v in batch.items()}).loss for i in (0, 2)]).mean()
    assert metrics["eval_loss"] == pytest.approx(expected.item(), rel=1e-5)
