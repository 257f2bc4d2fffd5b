"""Configuration of the feed-forward neural probabilistic language model (Bengio et al. 2003)."""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

from .config_utils import PresetMixin, check_positive, check_probability, check_token_id


@strict
class NNLMConfig(PresetMixin, PreTrainedConfig):
    r"""Configuration of :class:`NNLMForCausalLM`.

    The model reads the ``n - 1`` previous tokens ``w_{t-n+1} … w_{t-1}``, looks each up in the shared
    table ``C`` (``embedding_size`` = *m* in the paper), concatenates them into ``x`` and computes
    ``y = b + W x + U tanh(d + H x)`` (``hidden_size`` = *h*).

    Args:
        vocab_size: number of tokens.
        context_size: ``n - 1``, the number of previous tokens the model sees.
        embedding_size: size of a row of ``C``.
        hidden_size: size of the tanh layer.
        direct_connections: include the ``W x`` term (the paper's direct input → output connections).
        hidden_dropout_prob: dropout on the tanh layer (not in the paper; 0 reproduces it).
        init_range: weights are initialised uniformly in ``[-init_range, init_range]``.
        pad_token_id: fills the context before the first token and at padded positions.
    """

    model_type = "hfsm_nnlm"
    PRESETS = {
        "tiny": dict(vocab_size=99, context_size=3, embedding_size=8, hidden_size=16),
        # Bengio, Ducharme, Vincent & Jauvin (2003): sizes in the range of the paper's Brown-corpus
        # MLPs (n = 5 so 4 context words, m = 30, h = 100) with the direct connections.
        "bengio-2003": dict(context_size=4, embedding_size=30, hidden_size=100, direct_connections=True),
    }
    FIELD_RANGES = {"context_size": "positive"}  # with config_utils.FIELD_RANGES, the shared ones

    vocab_size: int = 10000
    context_size: int = 4
    embedding_size: int = 60
    hidden_size: int = 100
    direct_connections: bool = True
    hidden_dropout_prob: float | int = 0.0
    init_range: float = 0.1
    use_cache: bool = True
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3

    def validate_architecture(self):
        for field in ("vocab_size", "context_size", "embedding_size", "hidden_size", "init_range"):
            check_positive(field, getattr(self, field))
        check_probability("hidden_dropout_prob", self.hidden_dropout_prob)
        check_token_id("pad_token_id", self.pad_token_id, self.vocab_size)
        check_token_id("bos_token_id", self.bos_token_id, self.vocab_size)
        for eos in self.eos_token_id if isinstance(self.eos_token_id, list) else [self.eos_token_id]:
            check_token_id("eos_token_id", eos, self.vocab_size)


__all__ = ["NNLMConfig"]
