"""Hub-ready export: model card, weights, tokenizer, generation config and code in one folder."""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .models.stateful_generation import is_stateful

logger = logging.getLogger(__name__)

CELL_CITATIONS = {
    "lstm": (
        "Hochreiter & Schmidhuber (1997), Long Short-Term Memory",
        """@article{hochreiter1997long,
  title={Long Short-Term Memory},
  author={Hochreiter, Sepp and Schmidhuber, J{\\"u}rgen},
  journal={Neural Computation},
  volume={9},
  number={8},
  pages={1735--1780},
  year={1997}
}""",
    ),
    "peephole_lstm": (
        "Gers & Schmidhuber (2000), Recurrent Nets that Time and Count",
        """@inproceedings{gers2000recurrent,
  title={Recurrent Nets that Time and Count},
  author={Gers, Felix A. and Schmidhuber, J{\\"u}rgen},
  booktitle={Proceedings of the IEEE-INNS-ENNS International Joint Conference on Neural Networks (IJCNN)},
  volume={3},
  pages={189--194},
  year={2000}
}""",
    ),
    "gru": (
        "Cho et al. (2014), Learning Phrase Representations using RNN Encoder-Decoder",
        """@inproceedings{cho2014learning,
  title={Learning Phrase Representations using {RNN} Encoder-Decoder for Statistical Machine Translation},
  author={Cho, Kyunghyun and van Merri{\\"e}nboer, Bart and Gulcehre, Caglar and Bahdanau, Dzmitry and
          Bougares, Fethi and Schwenk, Holger and Bengio, Yoshua},
  booktitle={EMNLP},
  year={2014}
}""",
    ),
    "rnn": (
        "Elman (1990), Finding Structure in Time; Mikolov et al. (2010), Recurrent neural network based language model",
        """@article{elman1990finding,
  title={Finding Structure in Time},
  author={Elman, Jeffrey L.},
  journal={Cognitive Science},
  volume={14},
  number={2},
  pages={179--211},
  year={1990}
}""",
    ),
}

CITATIONS = {
    "hfsm_nnlm": (
        "Bengio et al. (2003), A Neural Probabilistic Language Model",
        """@article{bengio2003neural,
  title={A Neural Probabilistic Language Model},
  author={Bengio, Yoshua and Ducharme, R{\\'e}jean and Vincent, Pascal and Jauvin, Christian},
  journal={Journal of Machine Learning Research},
  volume={3},
  pages={1137--1155},
  year={2003}
}""",
    ),
    "hfsm_rnn": (
        "Zaremba, Sutskever & Vinyals (2014), Recurrent Neural Network Regularization",
        """@article{zaremba2014recurrent,
  title={Recurrent Neural Network Regularization},
  author={Zaremba, Wojciech and Sutskever, Ilya and Vinyals, Oriol},
  journal={arXiv preprint arXiv:1409.2329},
  year={2014}
}""",
    ),
}

CITATIONS["hfsm_rnn_seq2seq"] = (
    "Bahdanau, Cho & Bengio (2015), Neural Machine Translation by Jointly Learning to Align and Translate; "
    "Luong, Pham & Manning (2015), Effective Approaches to Attention-based Neural Machine Translation",
    """@inproceedings{bahdanau2015neural,
  title={Neural Machine Translation by Jointly Learning to Align and Translate},
  author={Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  booktitle={ICLR},
  year={2015}
}

@inproceedings{luong2015effective,
  title={Effective Approaches to Attention-based Neural Machine Translation},
  author={Luong, Minh-Thang and Pham, Hieu and Manning, Christopher D.},
  booktitle={EMNLP},
  year={2015}
}""",
)
CITATIONS["hfsm_bert"] = (
    "Devlin et al. (2019), BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
    """@inproceedings{devlin2019bert,
  title={{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding},
  author={Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina},
  booktitle={NAACL},
  year={2019}
}""",
)
CITATIONS["hfsm_transformer"] = CITATIONS["hfsm_transformer_lm"] = (
    "Vaswani et al. (2017), Attention Is All You Need",
    r"""@inproceedings{vaswani2017attention,
  title={Attention Is All You Need},
  author={Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
          Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  booktitle={NeurIPS},
  year={2017}
}""",
)
CITATIONS["hfsm_textcnn"] = (
    "Kim (2014), Convolutional Neural Networks for Sentence Classification",
    """@inproceedings{kim2014convolutional,
  title={Convolutional Neural Networks for Sentence Classification},
  author={Kim, Yoon},
  booktitle={EMNLP},
  pages={1746--1751},
  year={2014}
}""",
)
CITATIONS["hfsm_bilstm_crf"] = (
    "Huang, Xu & Yu (2015), Bidirectional LSTM-CRF Models for Sequence Tagging; "
    "Lample et al. (2016), Neural Architectures for Named Entity Recognition",
    """@article{huang2015bidirectional,
  title={Bidirectional {LSTM-CRF} Models for Sequence Tagging},
  author={Huang, Zhiheng and Xu, Wei and Yu, Kai},
  journal={arXiv preprint arXiv:1508.01991},
  year={2015}
}

@inproceedings{lample2016neural,
  title={Neural Architectures for Named Entity Recognition},
  author={Lample, Guillaume and Ballesteros, Miguel and Subramanian, Sandeep and Kawakami, Kazuya and Dyer, Chris},
  booktitle={NAACL},
  year={2016}
}""",
)

ARCHITECTURES = {
    "hfsm_nnlm": lambda c: (
        f"Feed-forward neural LM: {c.context_size} previous tokens → embeddings ({c.embedding_size}) → "
        f"tanh layer ({c.hidden_size}) → softmax" + (" + direct connections" if c.direct_connections else "")
    ),
    "hfsm_rnn": lambda c: (
        f"{c.num_hidden_layers}-layer {c.cell_type.upper().replace('_', ' ')} language model, "
        f"hidden size {c.hidden_size}, embeddings {c.embedding_size}"
        + (", tied input/output embeddings" if c.tie_word_embeddings else "")
    ),
    "hfsm_rnn_seq2seq": lambda c: (
        f"RNN encoder-decoder ({c.encoder_layers}-layer {'bidirectional ' if c.bidirectional_encoder else ''}"
        f"{c.encoder_cell_type.upper().replace('_', ' ')} encoder, {c.decoder_layers}-layer "
        f"{c.decoder_cell_type.upper().replace('_', ' ')} decoder, "
        f"hidden size {c.hidden_size}) with {c.attention_score} attention, {c.attention_wiring} wiring"
    ),
    "hfsm_transformer": lambda c: (
        f"Transformer encoder-decoder: {c.encoder_layers}+{c.decoder_layers} layers, d_model {c.d_model}, "
        f"{c.encoder_attention_heads} heads, feed-forward {c.encoder_ffn_dim}"
    ),
    "hfsm_transformer_lm": lambda c: (
        f"decoder-only Transformer language model: {c.decoder_layers} layers, d_model {c.d_model}, "
        f"{c.decoder_attention_heads} heads, feed-forward {c.decoder_ffn_dim}"
    ),
    "hfsm_bert": lambda c: (
        f"BERT encoder: {c.num_hidden_layers} layers, hidden size {c.hidden_size}, {c.num_attention_heads} heads, "
        f"feed-forward {c.intermediate_size}"
    ),
    "hfsm_bilstm_crf": lambda c: (
        f"sequence tagger: {'bidirectional ' if c.bidirectional else ''}{c.num_hidden_layers}-layer "
        f"{c.cell_type.upper().replace('_', ' ')} (hidden size {c.hidden_size}) over {c.embedding_size}-dimensional "
        f"word embeddings" + (f" and a character {c.char_encoder.upper()} encoder" if c.char_encoder else "")
        + (", linear-chain CRF" if c.use_crf else ", per-token softmax")
    ),
    "hfsm_textcnn": lambda c: (
        f"TextCNN sentence classifier: {c.num_filters} filters of each width {', '.join(map(str, c.filter_sizes))} "
        f"over {c.embedding_size}-dimensional embeddings ({c.embedding_mode}), max-over-time pooling"
    ),
}


CAUSAL_LM_USAGE = """```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("{repo_id}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
inputs = tokenizer({prompt!r}, return_tensors="pt")
greedy = model.generate(**inputs, max_new_tokens=100, do_sample=False)
beams = model.generate(**inputs, max_new_tokens=100, num_beams=4, length_penalty=1.0)
print(tokenizer.decode(beams[0], skip_special_tokens=True))
```

{cache_note} Pass `return_dict_in_generate=True` to get the cache back (as `past_key_values`, or `cache` from
transformers 5.24) and continue from it later."""

#: what the generation cache of a causal LM holds: a fixed-size state, or every layer's keys and values
STATE_CACHE_NOTE = ("The model's state is the generation cache: `generate()` feeds one token per step and beam "
                    "search reorders the state.")
KEY_VALUE_CACHE_NOTE = ("The generation cache holds every layer's keys and values (a `DynamicCache`); "
                        "`generate(..., cache_implementation=\"static\")` gives fixed-size buffers, as "
                        "`torch.compile` wants.")

SOURCE_TOKENIZER_FOLDER = "source_tokenizer"  # the source-side tokenizer of a model with separate vocabularies

SEQ2SEQ_USAGE = """```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

model = AutoModelForSeq2SeqLM.from_pretrained("{repo_id}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
# sources are encoded as in training: no special tokens, then the tokenizer's eos token
ids = tokenizer(["A man is riding a bike."], add_special_tokens=False)["input_ids"]
inputs = tokenizer.pad({{"input_ids": [i + [tokenizer.eos_token_id] for i in ids]}}, return_tensors="pt")
beams = model.generate(**inputs, num_beams=5, max_new_tokens=64)
print(tokenizer.batch_decode(beams, skip_special_tokens=True))
```

`output_attentions=True` returns the attention weights (`cross_attentions`), the alignment between
output and source tokens shown in the heatmap below."""

SEQ2SEQ_SEPARATE_VOCABULARIES_USAGE = """Source and target have separate vocabularies: the tokenizer in `source_tokenizer/` encodes the
source (`config.source_vocab_size` tokens), the one at the top decodes the translations (`config.vocab_size`).

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

model = AutoModelForSeq2SeqLM.from_pretrained("{repo_id}", trust_remote_code=True)
source_tokenizer = AutoTokenizer.from_pretrained("{repo_id}", subfolder="source_tokenizer")
target_tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
# sources are encoded as in training: no special tokens, then the source tokenizer's eos token
ids = source_tokenizer(["A man is riding a bike."], add_special_tokens=False)["input_ids"]
inputs = source_tokenizer.pad({{"input_ids": [i + [source_tokenizer.eos_token_id] for i in ids]}}, return_tensors="pt")
beams = model.generate(**inputs, num_beams=5, max_new_tokens=64)
print(target_tokenizer.batch_decode(beams, skip_special_tokens=True))
```

`output_attentions=True` returns the attention weights (`cross_attentions`), the alignment between
output and source tokens shown in the heatmap below."""


ENCODER_USAGE = """```python
from transformers import {auto_class}, AutoTokenizer

model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
outputs = model(**tokenizer("The cat sat on the mat.", return_tensors="pt"))
```

Every head of the family loads from the same folder with its own Auto class (the config's `auto_map`
names them all)."""


GENERATIVE_LIMITATIONS = """This is a small model for teaching, comparing architectures and reproducing classic results. It
models the style and spelling of its training text and nothing else: it has no knowledge of the
world, produces fluent-looking nonsense, and must not be used to generate text presented as fact.
It reproduces any biases of its training corpus."""

ENCODER_LIMITATIONS = """This is a small model for teaching, comparing architectures and reproducing classic results. Its
predictions reflect only its (small) training data: expect lower scores on text from other domains,
genres or periods, and check it on your own held-out data before relying on it. It reproduces any
biases of its training corpus and must not be used for decisions about people."""

HEAD_TASKS = {  # class-name suffix of an encoder head -> its Hub pipeline tag
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForQuestionAnswering": "question-answering",
    "ForMultipleChoice": "multiple-choice",
}


def _usage(model) -> tuple[str, str]:
    """The card's usage snippet and Hub task: translation, text generation, or an encoder's forward pass
    (tagged with the task of its head)."""
    if model.config.is_encoder_decoder:
        separate = getattr(model.config, "source_vocab_size", None) is not None
        return (SEQ2SEQ_SEPARATE_VOCABULARIES_USAGE if separate else SEQ2SEQ_USAGE), "translation"
    if model.can_generate():
        note = STATE_CACHE_NOTE if is_stateful(model) else KEY_VALUE_CACHE_NOTE
        return CAUSAL_LM_USAGE.replace("{cache_note}", note), "text-generation"
    name = type(model).__name__
    task = next((task for suffix, task in HEAD_TASKS.items() if name.endswith(suffix)), None)
    if task is None:
        task = "fill-mask" if model.get_output_embeddings() is not None else "feature-extraction"
    return ENCODER_USAGE, task


def _auto_class(model) -> str:
    """The Auto class that loads ``model``'s class (from the config's ``auto_map``)."""
    reference = f"{type(model).__module__.rsplit('.', 1)[-1]}.{type(model).__name__}"
    auto_map = getattr(model.config, "auto_map", None) or {}
    return next((auto for auto, ref in auto_map.items() if ref == reference and auto != "AutoConfig"), "AutoModel")


def _citations(config) -> tuple[str, str]:
    """The papers behind ``config``'s architecture: ``(names, BibTeX)``."""
    entries = [CITATIONS[config.model_type]] if config.model_type in CITATIONS else []
    cell = getattr(config, "cell_type", None)
    if cell is not None:
        entries.insert(0, CELL_CITATIONS["rnn" if cell.startswith("rnn") else cell])
    return "; ".join(e[0] for e in entries) or "—", "\n\n".join(e[1] for e in entries)


def _format_config(config) -> str:
    hidden = {"auto_map", "architectures", "transformers_version", "model_type", "dtype", "custom_pipelines"}
    keys = sorted(set(config.to_diff_dict()) - hidden)
    return ", ".join(f"`{k}={getattr(config, k)!r}`" for k in keys if hasattr(config, k))


def _tokenizer_note(tokenizer) -> str:
    """The card's default vocabulary note; it says "uncased" when the tokenizer lowercases its input (BERT
    vocabularies are "uncased" or "cased", and a cased text given to an uncased model loses its case)."""
    if tokenizer is None:
        return "no tokenizer saved"
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    uncased = normalizer is not None and normalizer.normalize_str("Aa") == "aa"
    return "uncased, see tokenizer.json" if uncased else "see tokenizer.json"


def _format_table(values: dict[str, Any]) -> str:
    rows = ["| | |", "|---|---|"]
    for key, value in values.items():
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        rows.append(f"| {key} | {shown} |")
    return "\n".join(rows)


RESULT_KEYS = ("eval_loss", "eval_perplexity", "eval_bleu", "validation_bleu", "test_bleu", "eval_mlm_perplexity",
               "eval_mlm_accuracy", "eval_nsp_accuracy", "train_loss", "steps", "best_global_step", "epochs", "train_runtime_seconds",
               "train_tokens_per_second")


# the metric part of a result key -> (model-index metric type, metric name shown on the Hub)
MODEL_INDEX_METRICS = {
    "perplexity": ("perplexity", "Perplexity"),
    "loss": ("loss", "Cross-entropy (nats/token)"),
    "bleu": ("bleu", "BLEU (sacreBLEU)"),
    "accuracy": ("accuracy", "Accuracy"),
    "f1": ("f1", "F1"),
    "precision": ("precision", "Precision"),
    "recall": ("recall", "Recall"),
    "exact_match": ("exact_match", "Exact match"),
    "matthews_correlation": ("matthews_correlation", "Matthews correlation"),
    "pearson": ("pearsonr", "Pearson correlation"),
    "spearmanr": ("spearmanr", "Spearman correlation"),
    "overall_f1": ("f1", "Entity-level F1 (seqeval)"),
    "overall_precision": ("precision", "Entity-level precision (seqeval)"),
    "overall_recall": ("recall", "Entity-level recall (seqeval)"),
    "overall_accuracy": ("accuracy", "Token accuracy"),
    "mlm_accuracy": ("accuracy", "Masked-LM accuracy"),
    "mlm_perplexity": ("perplexity", "Masked-LM perplexity"),
    "nsp_accuracy": ("accuracy", "Next-sentence prediction accuracy"),
}
RESULT_SPLITS = {"eval": "validation", "validation": "validation", "test": "test"}


def model_index_results(results: dict[str, Any], task: str, dataset: str) -> list[EvalResult]:
    """The evaluation figures of ``results`` as ``model-index`` entries: every key ``<split>_<metric>``
    with a split in ``RESULT_SPLITS`` and a metric in ``MODEL_INDEX_METRICS`` whose value is a number."""
    entries = []
    for key, value in results.items():
        split, _, metric = key.partition("_")
        if split not in RESULT_SPLITS or metric not in MODEL_INDEX_METRICS:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        metric_type, metric_name = MODEL_INDEX_METRICS[metric]
        entries.append(EvalResult(task_type=task, dataset_type=dataset, dataset_name=dataset,
                                  dataset_split=RESULT_SPLITS[split], metric_type=metric_type,
                                  metric_name=metric_name, metric_value=round(float(value), 4)))
    return entries


def family_card_section(model_type: str) -> str | None:
    """The family's own section of the card (``templates/families/<model_type>.md``), None if it has none."""
    family = resources.files("hf_seqmodels").joinpath(f"templates/families/{model_type}.md")
    return family.read_text(encoding="utf-8").strip() if family.is_file() else None


def _about(config) -> str:
    section = family_card_section(config.model_type)
    if section is None:  # a family defined outside the package: its config's docstring is the best we have
        logger.warning("No model-card section for %r (hf_seqmodels/templates/families/%s.md); using the "
                       "config's docstring.", config.model_type, config.model_type)
        section = (type(config).__doc__ or config.model_type).strip().split("\n\n")[0]
    return section


def summarize_results(results: dict[str, Any]) -> dict[str, Any]:
    """The figures of a training run worth showing on a card (losses in nats per token)."""
    return {k: results[k] for k in RESULT_KEYS if k in results}


def write_model_card(
    output_dir: str | Path,
    model,
    tokenizer=None,
    results: dict[str, Any] | None = None,
    *,
    training_data: str = "Not recorded.",
    training_args: dict[str, Any] | None = None,
    samples: dict[str, str] | None = None,
    repo_id: str | None = None,
    tokenizer_description: str | None = None,
    prompt: str = "ROMEO:",
    license: str = "apache-2.0",
    datasets: list[str] | None = None,
    images: dict[str, str] | None = None,
    eval_dataset: str | None = None,
) -> Path:
    """Write ``README.md`` (a model card with metadata) into ``output_dir`` and return its path.

    Args:
        results: evaluation figures, e.g. ``{"eval_loss": 1.61, "eval_perplexity": 5.0}``.
        training_args: the hyper-parameters to list under "Training procedure".
        samples: generated text to show, keyed by decoding method.
        images: pictures in ``output_dir`` to show under the evaluation, ``{caption: file name}``.
        eval_dataset: the dataset (Hub id or file name) the ``eval_``/``test_`` figures of ``results`` were
            measured on; with it they also go into the ``model-index`` metadata the Hub shows as a table.
    """
    output_dir = Path(output_dir)
    config = model.config
    model_type = config.model_type
    paper, citation = _citations(config)
    results = results or {}
    usage, task = _usage(model)
    eval_results = model_index_results(results, task, eval_dataset) if eval_dataset else []
    card_data = ModelCardData(
        library_name="transformers",
        license=license,
        pipeline_tag=task,
        tags=["hf_seqmodels", model_type, "custom_code", task],
        datasets=datasets,
        model_name=(repo_id or output_dir.resolve().name).rsplit("/", 1)[-1] if eval_results else None,
        eval_results=eval_results or None,
    )
    template = resources.files("hf_seqmodels").joinpath("templates/model_card.md").read_text(encoding="utf-8")
    pictures = {"Loss curve": "loss_curve.png", **(images or {})}
    plots = "".join(f"\n\n![{caption}]({name})" for caption, name in pictures.items() if (output_dir / name).exists())
    body = template.format(
        title=f"{type(model).__name__} ({model_type})",
        summary=f"A {ARCHITECTURES.get(model_type, lambda c: model_type)(config)}.",
        about=_about(config),
        architecture=ARCHITECTURES.get(model_type, lambda c: model_type)(config),
        model_type=model_type,
        model_class=type(model).__name__,
        num_parameters=f"{model.num_parameters():,}",
        vocab_size=config.vocab_size,
        tokenizer_kind=tokenizer_description or _tokenizer_note(tokenizer),
        config_summary=_format_config(config),
        paper=paper,
        training_data=training_data,
        training_procedure=_format_table(training_args) if training_args else "Not recorded.",
        evaluation=(_format_table(results) if results else "Not evaluated.") + plots,
        usage=usage.format(repo_id=repo_id or "<user>/<model-name>", prompt=prompt, auto_class=_auto_class(model)),
        samples="\n\n".join(f"**{k}**\n\n```\n{v}\n```" for k, v in (samples or {}).items()),
        limitations=GENERATIVE_LIMITATIONS if model.can_generate() else ENCODER_LIMITATIONS,
        citation=citation,
    )
    card = ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n{body}")
    path = output_dir / "README.md"
    card.save(path)
    logger.info("Model card written to %s", path)
    return path


def save_for_hub(output_dir: str | Path, model, tokenizer=None, **card_kwargs) -> Path:
    """Save everything a Hub repository needs: config + code, safetensors weights, generation config,
    tokenizer, model card and the code of the pipelines that run the model (as every ``save_pretrained`` of
    the package's models does: :mod:`hf_seqmodels.saved_folders`). The folder loads with
    ``trust_remote_code=True`` without our package. The tokenizer is saved first, so that the model's save
    checks it (:func:`hf_seqmodels.saved_folders.warn_if_sentences_never_end`)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)
    model.save_pretrained(output_dir)
    write_model_card(output_dir, model, tokenizer, **card_kwargs)
    return output_dir


# --------------------------------------------------------------------------- publishing a folder

PUSH_ALLOW_PATTERNS = (  # the only files `push_folder_to_hub` uploads (fnmatch patterns on relative paths)
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model-*-of-*.safetensors",
    "model.safetensors.index.json",
    "*.py",  # the model code named by the config's auto_map and its sibling modules (top level only)
    "README.md",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "source_tokenizer/tokenizer.json",  # the source-side tokenizer of a model with two vocabularies
    "source_tokenizer/tokenizer_config.json",
    "source_tokenizer/special_tokens_map.json",
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")  # uploaded only when README.md shows them
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)")


class PushError(ValueError):
    """A folder that must not be published as it is; the message names the missing or offending file."""


def _checked_card(folder: Path) -> ModelCard:
    """``README.md`` parsed with ``huggingface_hub.ModelCard`` (locally: ``ModelCard.validate`` needs the
    network, so the metadata is checked here), with a YAML header that has the keys the Hub shows."""
    path = folder / "README.md"
    if not path.is_file():
        raise PushError(f"{folder} has no README.md: write a model card first (hf_seqmodels.hub.write_model_card).")
    text = path.read_text(encoding="utf-8-sig")
    if not text.startswith("---"):
        raise PushError(f"{path} has no YAML metadata header (a first line '---').")
    try:
        card = ModelCard.load(path)  # a local Path: no network
    except Exception as error:  # yaml.YAMLError, ValueError from the card data
        raise PushError(f"The YAML header of {path} does not parse: {error}") from error
    metadata = card.data.to_dict()
    for key in ("license", "library_name"):
        if not isinstance(metadata.get(key), str) or not metadata[key]:
            raise PushError(f"The YAML header of {path} needs a `{key}` string (got {metadata.get(key)!r}).")
    for key in ("tags", "datasets", "language"):
        value = metadata.get(key)
        if value is not None and not (isinstance(value, str) or
                                      (isinstance(value, list) and all(isinstance(v, str) for v in value))):
            raise PushError(f"The YAML header of {path}: `{key}` must be a string or a list of strings, got {value!r}.")
    if "pipeline_tag" in metadata and not isinstance(metadata["pipeline_tag"], str):
        raise PushError(f"The YAML header of {path}: `pipeline_tag` must be a string.")
    return card


def _card_images(folder: Path, card: ModelCard) -> list[str]:
    """The local pictures the card shows (relative links to image files)."""
    names = []
    for link in _IMAGE_LINK.findall(card.text):
        if "://" in link or link.startswith(("/", "#", "data:")) or not link.lower().endswith(IMAGE_SUFFIXES):
            continue
        relative = Path(link).as_posix().removeprefix("./")
        if ".." in Path(relative).parts:
            continue
        if not (folder / relative).is_file():
            raise PushError(f"README.md shows {relative!r}, which is not in {folder}.")
        names.append(relative)
    return sorted(set(names))


def files_to_push(folder: str | Path) -> list[str]:
    """Validate ``folder`` and return the relative paths :func:`push_folder_to_hub` would upload.

    Checked first: ``config.json`` with an ``auto_map`` whose modules are there, ``model.safetensors``
    (or a complete sharded index), a model card whose YAML header parses, and no pickle-format
    file (``*.bin``, ``*.pt``…) next to the weights. Only files matching :data:`PUSH_ALLOW_PATTERNS` at their
    own folder level (``*.py`` is the top level's code, never the code of nested folders) and the images the
    card shows are kept: ``checkpoint-*`` folders, optimizer states, training logs and anything else stay
    local. A chosen file that is a link to a place outside the folder is refused. Raises :class:`PushError`
    naming what is missing or wrong.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PushError(f"{folder} is not a folder.")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise PushError(f"{folder} has no config.json: is it the output folder of a finished training run?")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PushError(f"{config_path} is not valid JSON: {error}") from error
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict) or not auto_map:
        raise PushError(f"{config_path} has no auto_map: the model would not load with trust_remote_code=True. "
                        "Save it with hf_seqmodels.hub.save_for_hub or the training scripts.")
    for reference in auto_map.values():
        for ref in reference if isinstance(reference, list) else [reference]:
            if ref is None:
                continue
            _require_module(folder, ref, "auto_map names")
    custom_pipelines = config.get("custom_pipelines") or {}
    if not isinstance(custom_pipelines, dict):
        raise PushError(f"{config_path}: custom_pipelines={custom_pipelines!r}; expected a dict of entries keyed by "
                        "task ({\"hfsm-translation\": {\"impl\": \"pipelines.TranslationPipeline\", ...}}): save "
                        "the model again with hf_seqmodels imported.")
    for task, entry in custom_pipelines.items():
        implementation = entry.get("impl") if isinstance(entry, dict) else None
        _require_module(folder, implementation, f"custom_pipelines names for {task!r}",
                        "; save the model again with hf_seqmodels imported (save_pretrained, Trainer.save_model or "
                        "hf_seqmodels.hub.save_for_hub write it), or call hf_seqmodels.pipelines.save_pipelines")
    pickles = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in PICKLE_SUFFIXES)
    if pickles:
        raise PushError(f"{folder} holds pickle-format files {pickles}: publish safetensors weights only "
                        "(remove or convert them first).")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise PushError(f"{folder} lacks {missing[0]}, a weight shard listed in model.safetensors.index.json.")
    elif not (folder / "model.safetensors").is_file():
        raise PushError(f"{folder} has no model.safetensors: weights must be saved as safetensors.")
    card = _checked_card(folder)
    chosen = set()
    for pattern in PUSH_ALLOW_PATTERNS:  # each pattern names one folder level: "*" never crosses a "/"
        parent, _, name_pattern = pattern.rpartition("/")
        directory = folder / parent
        if not _stays_inside(folder, directory) or not directory.is_dir():
            continue
        chosen.update(f"{parent}/{p.name}" if parent else p.name for p in directory.iterdir()
                      if fnmatch.fnmatchcase(p.name, name_pattern) and p.is_file())
    chosen.update(_card_images(folder, card))
    outside = sorted(name for name in chosen if not _stays_inside(folder, folder / name))
    if outside:
        raise PushError(f"{folder / outside[0]} is a link to a file outside {folder}: copy the file into the "
                        "folder (or remove the link) before publishing it.")
    return sorted(chosen)


def _require_module(folder: Path, reference: Any, named_by: str, advice: str = "") -> None:
    """A remote-code reference (``"module.Class"``, or ``"repo--module.Class"``) must name a ``module.py`` that
    is in ``folder``; else a :class:`PushError` saying which config entry names it."""
    module = reference.split("--")[-1].rsplit(".", 1)[0] + ".py" if isinstance(reference, str) else None
    if module is None or not (folder / module).is_file():
        raise PushError(f"{folder} has no {module or 'code module'}, which config.json's {named_by} "
                        f"({reference}){advice}.")


def _stays_inside(folder: Path, path: Path) -> bool:
    """Whether ``path``, once every symbolic link on the way is followed, is still below ``folder``."""
    return path.resolve().is_relative_to(folder.resolve())


def _copy_or_link(source: Path, target: Path, link: bool) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if link:
        try:
            os.link(source, target)  # no copy of large weights when the file system allows it
            return
        except OSError:
            pass
    shutil.copy2(source, target)


def stage_push_folder(folder: str | Path, target: str | Path, link: bool = False) -> list[tuple[str, int]]:
    """Write exactly the files :func:`push_folder_to_hub` uploads into the empty (or new) folder ``target``;
    returns ``(relative path, size in bytes)`` for each. ``link=True`` hard-links instead of copying where
    possible (for a throw-away staging folder: editing a linked file would edit the original)."""
    folder, target = Path(folder), Path(target)
    names = files_to_push(folder)
    if target.exists() and any(target.iterdir()):
        raise PushError(f"The dry-run folder {target} is not empty.")
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        _copy_or_link(folder / name, target / name, link)
    return [(name, (target / name).stat().st_size) for name in names]


def format_file_list(files: list[tuple[str, int]]) -> str:
    """``files`` (``(name, size)`` pairs) as aligned lines of sizes and names, with a total."""
    rows = [f"{size:>12,}  {name}" for name, size in files]
    return "\n".join([*rows, f"{sum(size for _, size in files):>12,}  total ({len(files)} files)"])


def push_folder_to_hub(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None, *,
                       dry_run: bool = False, dry_run_dir: str | Path | None = None,
                       commit_message: str = "Upload with hf_seqmodels") -> str:
    """Publish a folder written by :func:`save_for_hub` or a training run as the model repository ``repo_id``.

    The folder is validated and only its allow-listed files are uploaded (:func:`files_to_push`).
    The repository is created if needed (``private`` applies to a new repository). ``token`` is
    optional: without it ``huggingface_hub`` reads ``HF_TOKEN`` or the stored login. The token is
    never written to a file or a log.

    ``dry_run=True`` touches no network: it writes exactly the folder that would be uploaded to
    ``dry_run_dir`` (or a new temporary folder) and returns its path (``hf-seqmodels push --dry-run`` prints
    its files and sizes).
    Otherwise returns the URL of the commit.
    """
    folder = Path(folder)
    if dry_run:
        target = Path(dry_run_dir) if dry_run_dir is not None else Path(tempfile.mkdtemp(prefix="hf-push-dry-run-"))
        files = stage_push_folder(folder, target)
        logger.info("Dry run: wrote the %d files that would be uploaded to %s (%s) to %s", len(files), repo_id,
                    "private" if private else "public", target)
        logger.debug("Files:\n%s", format_file_list(files))
        return str(target)
    from huggingface_hub import HfApi

    names = files_to_push(folder)
    api = HfApi(token=token)
    repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    with tempfile.TemporaryDirectory(prefix="hf-push-") as staging:
        files = stage_push_folder(folder, staging, link=True)
        logger.info("Uploading to %s:\n%s", repo.repo_id, format_file_list(files))
        info = api.upload_folder(folder_path=staging, repo_id=repo.repo_id, repo_type="model",
                                 allow_patterns=names, commit_message=commit_message)
    url = getattr(info, "commit_url", None) or str(info)
    logger.info("Pushed %d files to %s", len(names), url)
    return url
