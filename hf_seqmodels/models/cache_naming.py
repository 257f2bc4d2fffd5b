"""The name of the generation cache where our models meet transformers.

Up to transformers 5.23, ``generate()`` passes the cache of earlier decoding steps to ``forward`` as
``past_key_values`` and reads it back from the output's ``past_key_values`` field. transformers 5.24 renamed
both to ``cache``: ``generate()`` passes ``cache=``, its output classes have a ``cache`` field (a
``past_key_values=`` argument is renamed, with a deprecation warning) and ``output.past_key_values`` is a
deprecated alias. Our models accept the cache under either name and return it under the installed version's
name, so the same code (also the copy saved beside a model for ``trust_remote_code``) runs on both.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

from transformers import GenerationMixin

#: ``"cache"`` with transformers >= 5.24, ``"past_key_values"`` before.
CACHE_NAME = ("cache" if "cache" in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
              else "past_key_values")


def given_cache(past_key_values: Any, cache: Any) -> Any:
    """The cache a ``forward`` call received, as ``past_key_values`` or as ``cache`` (the name transformers
    >= 5.24 passes it under); every ``forward`` that takes a cache has both parameters. With transformers >= 5.24
    the old name works with a deprecation warning, as it does for the built-in models."""
    if cache is not None and past_key_values is not None:
        raise ValueError("Got a cache both as `cache` and as `past_key_values`; pass it once.")
    if past_key_values is not None and CACHE_NAME == "cache":
        warnings.warn("`past_key_values` is deprecated and will be removed in version 5.40.0 of transformers; "
                      "pass the cache as `cache` (hf_seqmodels.models.cache_naming.cache_field names it for the "
                      "installed version).", FutureWarning, stacklevel=4)  # the caller of forward
    return past_key_values if cache is None else cache


def cache_field(cache: Any) -> dict[str, Any]:
    """``{name: cache}``: the keyword for a transformers output class (``CausalLMOutputWithPast``,
    ``Seq2SeqLMOutput``, ...) or a ``generate``/``forward`` call of the installed version."""
    return {CACHE_NAME: cache}


def output_cache(output: Any) -> Any:
    """The cache in a model output (None when it has none)."""
    return getattr(output, CACHE_NAME, None)


__all__ = ["CACHE_NAME", "cache_field", "given_cache", "output_cache"]
