"""``add_bos_token`` / ``add_eos_token``: the special-token switches of transformers' Llama-style tokenizers.

Our tokenizers are plain ``PreTrainedTokenizerFast`` (``TokenizersBackend``) objects whose special tokens
come from the ``tokenizers`` post-processor saved in ``tokenizer.json``:

==========================  =============  =============  ==============================================
template                    add_bos_token  add_eos_token  used by
==========================  =============  =============  ==============================================
``<bos> A`` (pair          True           False          causal LMs (the default of ``train_tokenizer``)
``<bos> A <eos> B``)
``A <eos>``                 False          True           sequence-to-sequence sources and ``text_target``
                                                          labels, as Marian and T5 encode them
``A``                       False          False          no special tokens
``<bos> A <eos>``           True           True
==========================  =============  =============  ==============================================

Setting ``tokenizer.add_bos_token`` / ``tokenizer.add_eos_token`` rebuilds the template with
transformers' own ``update_post_processor`` (pairs become ``<bos> A <eos> <bos> B <eos>`` with the same
switches), exactly as on a Llama tokenizer; lm-evaluation-harness's ``add_bos_token`` model argument and
``AutoTokenizer.from_pretrained(path, add_bos_token=False)`` do the same at load time.

What a saved tokenizer does is kept in ``tokenizer.json``, so any reload (``AutoTokenizer`` without this
package included) encodes exactly as before.  transformers 5.24 however drops the two flags from
``tokenizer_config.json`` whenever a ``tokenizer.json`` exists, so a reloaded ``TokenizersBackend`` *reports*
``add_bos_token=False`` (any tokenizer, Llama's included) while its template still adds ``<bos>``.
:func:`special_token_switches` reads the switches from the template, and
:func:`restore_special_token_switches` sets the two attributes from it, so that toggling one of them on a
reloaded tokenizer keeps the other.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tokenizers import processors

__all__ = [
    "apply_special_token_switches",
    "causal_post_processor",
    "restore_special_token_switches",
    "special_token_switches",
    "with_special_token_switches",
]


def causal_post_processor(bos: str, bos_id: int, eos: str, eos_id: int) -> processors.TemplateProcessing:
    """The causal-LM template: ``<bos> A``, pairs ``<bos> A <eos> B``."""
    return processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {eos} $B:1", special_tokens=[(bos, bos_id), (eos, eos_id)]
    )


def _template_items(tokenizer: Any) -> list[dict] | None:
    """The ``single`` template of the tokenizer's post-processor as ``tokenizers`` serialises it, or
    ``None`` when there is no template post-processor."""
    post_processor = _backend(tokenizer).post_processor
    if post_processor is None:
        return []
    state = json.loads(post_processor.__getstate__())
    return state.get("single") if state.get("type") == "TemplateProcessing" else None


def special_token_switches(tokenizer: Any) -> tuple[bool, bool]:
    """``(add_bos_token, add_eos_token)`` as the tokenizer's saved template actually applies them:
    whether ``tokenizer(text)`` starts with its ``bos_token`` and ends with its ``eos_token``.

    Raises:
        ValueError: the post-processor is not a template (e.g. BERT's or GPT-2's byte-level one).
    """
    items = _template_items(tokenizer)
    if items is None:
        raise ValueError(
            f"{type(tokenizer).__name__} has a {type(_backend(tokenizer).post_processor).__name__} post-processor; "
            "add_bos_token/add_eos_token describe TemplateProcessing templates only."
        )
    specials = [item["SpecialToken"]["id"] if "SpecialToken" in item else None for item in items]
    starts_with_bos = bool(specials) and tokenizer.bos_token is not None and specials[0] == tokenizer.bos_token
    ends_with_eos = bool(specials) and tokenizer.eos_token is not None and specials[-1] == tokenizer.eos_token
    return starts_with_bos, ends_with_eos


def apply_special_token_switches(tokenizer: Any, add_bos_token: bool, add_eos_token: bool) -> Any:
    """Set both switches (in place) and rebuild the template; the causal default keeps our
    ``<bos> A <eos> B`` pair template.  Returns ``tokenizer``."""
    _backend(tokenizer)  # refuses tokenizers without a ``tokenizers`` backend
    object.__setattr__(tokenizer, "_add_bos_token", add_bos_token)
    object.__setattr__(tokenizer, "_add_eos_token", add_eos_token)
    if (add_bos_token, add_eos_token) == (True, False) and tokenizer.bos_token and tokenizer.eos_token:
        backend = _backend(tokenizer)
        backend.post_processor = causal_post_processor(
            tokenizer.bos_token, tokenizer.bos_token_id, tokenizer.eos_token, tokenizer.eos_token_id
        )
    else:
        tokenizer.update_post_processor()
    return tokenizer


def restore_special_token_switches(tokenizer: Any) -> Any:
    """Set ``tokenizer.add_bos_token`` / ``add_eos_token`` from its saved template without changing what it
    encodes (for a tokenizer reloaded by plain transformers, which reports both as False).  Returns it."""
    add_bos_token, add_eos_token = special_token_switches(tokenizer)
    object.__setattr__(tokenizer, "_add_bos_token", add_bos_token)
    object.__setattr__(tokenizer, "_add_eos_token", add_eos_token)
    return tokenizer


def with_special_token_switches(tokenizer: Any, add_bos_token: bool, add_eos_token: bool) -> Any:
    """``tokenizer`` itself when its template already has these switches (its two attributes set from the
    template), else a copy that has them: what the given tokenizer encodes never changes."""
    if special_token_switches(tokenizer) == (add_bos_token, add_eos_token):
        return restore_special_token_switches(tokenizer)
    return apply_special_token_switches(copy.deepcopy(tokenizer), add_bos_token, add_eos_token)


def _backend(tokenizer: Any):
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(tokenizer, "update_post_processor"):
        raise ValueError(
            f"{type(tokenizer).__name__} has no `tokenizers` backend: add_bos_token/add_eos_token need a fast "
            "(PreTrainedTokenizerFast) tokenizer."
        )
    return backend
