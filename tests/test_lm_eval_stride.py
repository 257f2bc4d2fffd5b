"""--eval_stride: a Transformer LM's validation windows overlap, each token scored once with context before it."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hf_seqmodels import RNNConfig, RNNForCausalLM, TransformerForCausalLM, TransformerLMConfig
from hf_seqmodels.training import LMTrainingArguments, evaluate_causal_lm
from hf_seqmodels.training.lm.data import StreamWindows, batchify
from hf_seqmodels.training.lm.trainer import LM_DEFAULTS, card_training_args

VOCAB = 13


def transformer_lm() -> TransformerForCausalLM:
    torch.manual_seed(0)
    config = TransformerLMConfig.from_preset("tiny", vocab_size=VOCAB, dropout=0.0, max_position_embeddings=16)
    return TransformerForCausalLM(config).eval()


def test_windows_read_their_context_and_score_only_their_own_tokens():
    stream = torch.arange(20)[None]  # one row: a slice of it is a view of the stream
    windows = StreamWindows(stream, 4, context=3)
    first, second, last = windows.batch(0), windows.batch(1), windows.batch(len(windows) - 1)
    assert first.input_ids.tolist() == [[0, 1, 2, 3]] and first.labels.tolist() == [[1, 2, 3, 4]]
    assert second.input_ids.tolist() == [[1, 2, 3, 4, 5, 6, 7]]
    assert second.labels.tolist() == [[-100, -100, -100, 5, 6, 7, 8]]
    assert last.input_ids.tolist() == [[13, 14, 15, 16, 17, 18]] and last.labels.tolist() == [[-100] * 3 + [17, 18, 19]]
    assert stream.tolist() == [list(range(20))]  # the -100 went into a copy


def test_every_token_is_scored_once_from_its_window_start():
    """Token ``p + 1`` of a row is predicted from the row since ``max(0, s - (block - stride))``, ``s`` the start
    of its window ``floor(p / stride) * stride``: computed here one position at a time."""
    model = transformer_lm()
    ids = torch.randint(0, VOCAB, (2 * 41,), generator=torch.Generator().manual_seed(1))
    block, stride = 12, 5
    result = evaluate_causal_lm(model, ids, batch_size=2, block_size=block, stride=stride)
    total, count = 0.0, 0
    with torch.no_grad():
        for row in batchify(ids, 2):
            for position in range(row.shape[0] - 1):
                first = max(0, position // stride * stride - (block - stride))
                logits = model(row[first : position + 1][None], use_cache=False).logits[0, -1]
                total += F.cross_entropy(logits, row[position + 1]).item()
                count += 1
    assert result["eval_tokens"] == count == 2 * 40
    assert math.isclose(result["eval_loss"], total / count, rel_tol=1e-5)
    side_by_side = evaluate_causal_lm(model, ids, batch_size=2, block_size=block)
    assert side_by_side["eval_tokens"] == count and side_by_side["eval_loss"] != result["eval_loss"]
    assert evaluate_causal_lm(model, ids, batch_size=2, block_size=block, stride=block) == side_by_side


def test_a_stride_is_refused_for_a_model_that_carries_its_state_and_outside_one_to_block_size():
    torch.manual_seed(0)
    rnn = RNNForCausalLM(RNNConfig.from_preset("tiny", vocab_size=VOCAB))
    ids = torch.randint(0, VOCAB, (40,))
    with pytest.raises(ValueError, match="eval_stride.*carries its state"):
        evaluate_causal_lm(rnn, ids, batch_size=2, block_size=8, stride=4)
    with pytest.raises(ValueError, match=r"eval_stride.*from 1 to --block_size \(8\)"):
        evaluate_causal_lm(transformer_lm(), ids, batch_size=2, block_size=8, stride=9)
    with pytest.raises(ValueError, match="eval_stride"):
        LMTrainingArguments(output_dir="unused", block_size=8, eval_stride=0)


def test_the_model_card_says_how_the_validation_windows_were_scored():
    args = LMTrainingArguments(output_dir="unused", block_size=256, eval_stride=128).with_recipe(task_defaults=LM_DEFAULTS)
    assert card_training_args(args)["validation windows"] == "256 tokens moving on by 128, each scoring its last 128"
    side_by_side = LMTrainingArguments(output_dir="unused", block_size=256).with_recipe(task_defaults=LM_DEFAULTS)
    assert "validation windows" not in card_training_args(side_by_side)
