"""Under CPU bf16 autocast a post-norm stack keeps the stream between sub-layers in bfloat16 (Add & Norm sums and
normalises in the autocast dtype, with float32 statistics); a pre-norm stream stays float32."""

from __future__ import annotations

import torch

from hf_seqmodels import (
    BertConfig,
    BertForPreTraining,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
)
from hf_seqmodels.models.transformer_layers import AddNorm

SIZES = dict(vocab_size=40, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32)


def add_norm_outputs(model, **inputs) -> list[torch.dtype]:
    dtypes = []
    hooks = [m.register_forward_hook(lambda mod, args, out: dtypes.append(out.dtype))
             for m in model.modules() if isinstance(m, AddNorm)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**inputs)
    for hook in hooks:
        hook.remove()
    return dtypes, out


def test_post_norm_stream_is_bf16_and_the_loss_is_the_float32_stream_s():
    torch.manual_seed(0)
    model = TransformerForConditionalGeneration(TransformerConfig(**SIZES, dropout=0.0)).eval()
    ids = torch.randint(4, 40, (3, 12))
    labels = torch.randint(4, 40, (3, 9))
    dtypes, out = add_norm_outputs(model, input_ids=ids, labels=labels)
    assert len(dtypes) == 2 * 2 + 2 * 3 and set(dtypes) == {torch.bfloat16}  # float32 before
    assert out.encoder_last_hidden_state.dtype == torch.bfloat16
    full = model(input_ids=ids, labels=labels).loss  # float32 everywhere
    torch.testing.assert_close(out.loss, full, rtol=2e-2, atol=0)


def test_bert_post_norm_layers_are_bf16_under_autocast():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    dtypes, out = add_norm_outputs(BertForPreTraining(config).eval(), input_ids=torch.randint(4, 40, (2, 10)))
    assert dtypes and set(dtypes) == {torch.bfloat16}


def test_pre_norm_stream_stays_float32():
    torch.manual_seed(0)
    config = TransformerLMConfig(vocab_size=40, d_model=32, decoder_layers=2, decoder_attention_heads=2,
                                 decoder_ffn_dim=64, max_position_embeddings=32, normalize_before=True)
    dtypes, _ = add_norm_outputs(TransformerForCausalLM(config).eval(), input_ids=torch.randint(4, 40, (2, 10)))
    assert dtypes and set(dtypes) == {torch.float32}
