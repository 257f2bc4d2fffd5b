"""Model cards: the ``README.md`` of a folder to share (usage, the family's papers and architecture sentence,
training and evaluation figures with their ``model-index`` metadata), and :func:`save_for_hub`, which writes the
whole folder: weights, tokenizer, generation config, code and card. Publishing it is :mod:`hf_seqmodels.publishing`.

What a card says of a family (its papers, the sentence that describes a config) is the family's
(:class:`~hf_seqmodels.families.Family` ``citation``, ``config_citations``, ``architecture``); its longer
section is ``templates/families/<model_type>.md``.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .models.stateful_generation import is_stateful

logger = logging.getLogger(__name__)

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


def _family(config):
    """The registry's family of ``config``; None for a model of no registered family."""
    from .registry import family_of

    try:
        return family_of(config)
    except ValueError:
        return None


def _citations(config) -> tuple[str, str]:
    """The papers behind ``config``'s architecture, from its family: ``(names, BibTeX)``."""
    family = _family(config)
    entries = family.citations(config) if family is not None else ()
    return "; ".join(e.names for e in entries) or "—", "\n\n".join(e.bibtex for e in entries)


def architecture_sentence(config) -> str:
    """The sentence of ``config``'s family that describes its architecture (its ``model_type`` without one)."""
    family = _family(config)
    return family.describe(config) if family is not None else config.model_type


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
    architecture = architecture_sentence(config)
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
        summary=f"A {architecture}.",
        about=_about(config),
        architecture=architecture,
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
