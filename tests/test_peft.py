"""PEFT on our models as its documentation shows it: LoRA trained for a step, the adapter saved, and the model
loaded back through ``AutoPeftModelForCausalLM.from_pretrained(adapter_folder, ...)`` gives the same logits.

An adapter saved with ``task_type="CAUSAL_LM"`` names transformers' ``AutoModelForCausalLM`` and loads as it
is. One saved without a task type names the base model's own module (``hf_seqmodels.models.modeling_...``),
which PEFT imports only when the caller allows it: ``import_allowlist=["hf_seqmodels"]``.
"""

from __future__ import annotations

import pytest
import torch

peft = pytest.importorskip("peft")

import hf_seqmodels  # noqa: E402, F401  (registers the Auto classes)
from hf_seqmodels import RNNConfig, RNNForCausalLM, TransformerForCausalLM, TransformerLMConfig  # noqa: E402

MODELS = {
    # model class, config, the modules LoRA adapts
    "transformer_lm": (TransformerForCausalLM, lambda: TransformerLMConfig.from_preset("tiny"), ["q_proj", "v_proj"]),
    "rnn_lm": (RNNForCausalLM, lambda: RNNConfig.from_preset("tiny"), ["lm_head"]),
}


def ids_for(config, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, config.vocab_size, (2, 9), generator=generator)  # (B, T), no special tokens


def trained_adapter(name, task_type, folder):
    """Save a tiny base model to ``folder/base``, train LoRA on it for one step, save the adapter to
    ``folder/adapter``; returns the trained model's logits ``(B, T, V)`` and the base model's on the same ids."""
    model_class, make_config, target_modules = MODELS[name]
    torch.manual_seed(0)
    model_class(make_config()).save_pretrained(folder / "base")
    base = model_class.from_pretrained(folder / "base").eval()
    ids = ids_for(base.config)
    with torch.no_grad():
        base_logits = base(ids).logits
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=target_modules, task_type=task_type)
    model = peft.get_peft_model(base, lora).train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    model.eval().save_pretrained(folder / "adapter")
    with torch.no_grad():
        return model(input_ids=ids).logits, base_logits


@pytest.mark.parametrize("name", sorted(MODELS))
def test_auto_peft_model_reloads_a_causal_lm_adapter(name, tmp_path):
    logits, base_logits = trained_adapter(name, "CAUSAL_LM", tmp_path)
    assert not torch.allclose(logits, base_logits, atol=1e-4)  # the trained adapter changes the output
    loaded = peft.AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter", trust_remote_code=True).eval()
    assert isinstance(loaded.get_base_model(), MODELS[name][0])
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids_for(loaded.config)).logits, logits, atol=1e-6, rtol=0)


def test_adapter_without_task_type_loads_with_the_import_allowlist(tmp_path):
    logits, _ = trained_adapter("transformer_lm", None, tmp_path)
    with pytest.raises(ValueError, match="import allowlist"):  # PEFT's guard against importing any package
        peft.AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter", trust_remote_code=True)
    loaded = peft.AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter", trust_remote_code=True,
                                                           import_allowlist=["hf_seqmodels"]).eval()
    assert type(loaded.get_base_model()) is TransformerForCausalLM
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids_for(loaded.config)).logits, logits, atol=1e-6, rtol=0)
