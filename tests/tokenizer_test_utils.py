"""Tiny tokenizers for the training and data tests, built directly with the ``tokenizers`` library (no training
run): their ids are known in advance and the same in every process."""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
BERT_SPECIALS = ["[CLS]", "[SEP]", "[MASK]"]


def char_tokenizer(characters: str, bos_template: bool = True, bert_specials: bool = False,
                   size: int | None = None) -> PreTrainedTokenizerFast:
    """One token per character: ``<pad>`` 0, ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3 (then ``[CLS]`` 4, ``[SEP]`` 5,
    ``[MASK]`` 6 with ``bert_specials``), then the distinct ``characters`` in sorted order. ``bos_template``
    puts ``<bos>`` before every text (``add_special_tokens``); ``size`` pads the vocabulary with unused tokens."""
    specials = SPECIALS + (BERT_SPECIALS if bert_specials else [])
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(characters)))}
    vocab.update({f"<unused{i}>": i for i in range(len(vocab), size or 0)})
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    if bos_template:
        backend.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    bert = {"cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"} if bert_specials else {}
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                   eos_token="<eos>", **bert)
