"""The private attributes of torch, transformers, accelerate and datasets that the package still reads or
overrides, each checked to exist: an upgrade that removes or renames one fails here, by name, instead of
deep inside a model or a training run. The package reaches no other private attribute of those libraries
(the source scan below fails on a new one), and the models reach theirs through one module,
``models/library_internals.py``, only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from transformers import GenerationMixin, PreTrainedModel

PACKAGE = Path(__file__).resolve().parents[1] / "hf_seqmodels"

#: private name -> (where the package uses it, a check that it still exists)
USED = {
    "_higher_order_ops": ("models/library_internals.py: the scan operator of exported recurrences",
                          lambda: callable(__import__("torch._higher_order_ops.scan", fromlist=["scan_op"]).scan_op)),
    "_version": ("models/library_internals.py: in-place changes of a cached tensor",
                 lambda: isinstance(torch.zeros(1)._version, int)),
    "_is_hf_initialized": ("models/library_internals.py: transformers' init bookkeeping",
                           lambda: "_is_hf_initialized" in Path(__import__("transformers").modeling_utils.__file__)
                           .read_text()),
    "_init_weights": ("the models' weight initialisation (the hook transformers' models override)",
                      lambda: callable(PreTrainedModel._init_weights)),
    "_resize_token_embeddings": ("models/modeling_textcnn.py: resizing keeps the padding row",
                                 lambda: callable(PreTrainedModel._resize_token_embeddings)),
    "_prepare_generate_kwargs": ("pipelines.py: the translation pipeline's generate arguments (transformers >= 5.20)",
                                 lambda: callable(__import__("transformers").Pipeline._prepare_generate_kwargs)),
    "_prepare_cache_for_generation": ("models/stateful_generation.py, modeling_rnn_seq2seq.py: generate's cache",
                                      lambda: callable(GenerationMixin._prepare_cache_for_generation)),
    "_foreach_copy_": ("training/core/master_weights.py: one kernel launch copies every gradient or weight",
                       lambda: callable(torch._foreach_copy_)),
}
#: the one module of models/ that reaches private attributes (the rest are methods transformers' models override)
MODELS_INTERNALS = "models/library_internals.py"
#: the library objects as the package names them (modules, accelerators, datasets, tensors)
PRIVATE = re.compile(r"\b(?:torch|transformers|accelerate|accelerator|datasets|dataset|train|validation|auto_class|"
                     r"tensor|PartialState)"
                     r"(?:\.[A-Za-z]\w*)*\.(_[a-z]\w*)|\"(_is_hf_initialized)\"")


@pytest.mark.parametrize("name", sorted(USED))
def test_each_private_attribute_the_package_uses_still_exists(name):
    where, exists = USED[name]
    assert exists(), f"{name} (used by {where}) is gone from the installed library"


def test_the_package_uses_no_other_private_attribute_of_its_libraries():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            for match in PRIVATE.finditer(code):
                name = match.group(1) or match.group(2)
                if name not in USED and not code.lstrip().startswith(('"""', "``")) and "``" not in code:
                    found[f"{path.relative_to(PACKAGE)}:{number}"] = name
    assert not found, f"private attributes outside the checked list: {found}"


def test_the_models_reach_private_attributes_through_one_module():
    """A reading of a private attribute in ``models/`` (the code copied beside a saved model) anywhere but
    :data:`MODELS_INTERNALS` fails, whatever the object is called."""
    reads = re.compile(r"\._(?:version|is_hf_initialized|higher_order_ops)\b|\"_is_hf_initialized\"")
    found = [f"{path.relative_to(PACKAGE)}:{number}" for path in (PACKAGE / "models").glob("*.py")
             if str(path.relative_to(PACKAGE)) != MODELS_INTERNALS
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if reads.search(line.split("#")[0]) and "``" not in line]
    assert not found, f"private attributes read outside {MODELS_INTERNALS}: {found}"
