"""Hub-ready export: model card, weights, tokenizer, generation config and code in one folder."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData

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
}


def _citations(config) -> tuple[str, str]:
    """The papers behind ``config``'s architecture: ``(names, BibTeX)``."""
    entries = [CITATIONS[config.model_type]] if config.model_type in CITATIONS else []
    cell = getattr(config, "cell_type", None)
    if cell is not None:
        entries.insert(0, CELL_CITATIONS["rnn" if cell.startswith("rnn") else cell])
    return "; ".join(e[0] for e in entries) or "—", "\n\n".join(e[1] for e in entries)


def _format_config(config) -> str:
    hidden = {"auto_map", "architectures", "transformers_version", "model_type", "dtype"}
    keys = sorted(set(config.to_diff_dict()) - hidden)
    return ", ".join(f"`{k}={getattr(config, k)!r}`" for k in keys if hasattr(config, k))


def _format_table(values: dict[str, Any]) -> str:
    rows = ["| | |", "|---|---|"]
    for key, value in values.items():
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        rows.append(f"| {key} | {shown} |")
    return "\n".join(rows)


RESULT_KEYS = ("eval_loss", "eval_perplexity", "train_loss", "steps", "epochs", "train_runtime_seconds",
               "train_tokens_per_second")


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
) -> Path:
    """Write ``README.md`` (a model card with metadata) into ``output_dir`` and return its path.

    Args:
        results: evaluation figures, e.g. ``{"eval_loss": 1.61, "eval_perplexity": 5.0}``.
        training_args: the hyper-parameters to list under "Training procedure".
        samples: generated text to show, keyed by decoding method.
    """
    output_dir = Path(output_dir)
    config = model.config
    model_type = config.model_type
    paper, citation = _citations(config)
    results = results or {}
    card_data = ModelCardData(
        library_name="transformers",
        license=license,
        pipeline_tag="text-generation",
        tags=["hf_seqmodels", model_type, "custom_code", "text-generation"],
        datasets=datasets,
    )
    template = resources.files("hf_seqmodels").joinpath("templates/model_card.md").read_text(encoding="utf-8")
    loss_plot = "\n\n![Loss curve](loss_curve.png)" if (output_dir / "loss_curve.png").exists() else ""
    body = template.format(
        title=f"{type(model).__name__} ({model_type})",
        summary=f"A {ARCHITECTURES.get(model_type, lambda c: model_type)(config)}.",
        architecture=ARCHITECTURES.get(model_type, lambda c: model_type)(config),
        model_type=model_type,
        model_class=type(model).__name__,
        num_parameters=f"{model.num_parameters():,}",
        vocab_size=config.vocab_size,
        tokenizer_kind=tokenizer_description or ("see tokenizer.json" if tokenizer is not None else "no tokenizer saved"),
        config_summary=_format_config(config),
        paper=paper,
        repo_id=repo_id or "<user>/<model-name>",
        prompt=prompt,
        training_data=training_data,
        training_procedure=_format_table(training_args) if training_args else "Not recorded.",
        evaluation=(_format_table(results) if results else "Not evaluated.") + loss_plot,
        samples="\n\n".join(f"**{k}**\n\n```\n{v}\n```" for k, v in (samples or {}).items()),
        citation=citation,
    )
    card = ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n{body}")
    path = output_dir / "README.md"
    card.save(path)
    logger.info("Model card written to %s", path)
    return path


def save_for_hub(output_dir: str | Path, model, tokenizer=None, **card_kwargs) -> Path:
    """Save everything a Hub repository needs: config + code, safetensors weights, generation config,
    tokenizer and model card. The folder loads with ``trust_remote_code=True`` without our package."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)
    write_model_card(output_dir, model, tokenizer, **card_kwargs)
    return output_dir


def push_folder_to_hub(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Upload a folder written by :func:`save_for_hub` or a training run to ``repo_id`` (needs network and
    a token). Training checkpoints in the folder stay local."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, commit_message="Upload with hf_seqmodels",
        ignore_patterns=["checkpoint-*", "tmp-checkpoint-*", "*.tmp"],
    )
    return str(info)
