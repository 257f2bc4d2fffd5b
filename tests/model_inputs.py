"""Forward inputs with labels for any head of any family of the registry, as the tests feed them.

The inputs are the family's kind of example inputs (:mod:`hf_seqmodels.example_inputs`, what export traces); the
labels are made here, for the Auto class the head is registered under.
"""

from __future__ import annotations

from typing import Any

import torch

from hf_seqmodels.example_inputs import INPUT_KINDS, random_ids
from hf_seqmodels.families import Family

#: the forward arguments that are labels (the Trainer's ``label_names`` of our heads)
LABEL_NAMES = ("labels", "next_sentence_label", "start_positions", "end_positions")


def task_labels(task: str, config: Any, inputs: dict[str, torch.Tensor],
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Labels for the head registered under the Auto class named ``task``, shaped for ``inputs``."""
    ids = inputs["input_ids"]
    batch, length = ids.shape[0], ids.shape[-1]
    if task == "AutoModelForCausalLM":
        return {"labels": ids.clone()}
    if task == "AutoModelForSeq2SeqLM":  # the decoder inputs shifted left: what teacher forcing predicts
        decoder = inputs["decoder_input_ids"]
        return {"labels": torch.cat([decoder[:, 1:], random_ids(generator, (batch, 1), config.vocab_size)], dim=1)}
    if task == "AutoModelForSequenceClassification":
        return {"labels": torch.randint(config.num_labels, (batch,), generator=generator)}
    if task == "AutoModelForTokenClassification":
        return {"labels": torch.randint(config.num_labels, (batch, length), generator=generator)}
    if task in ("AutoModelForMaskedLM", "AutoModelForPreTraining"):
        chosen = torch.rand(ids.shape, generator=generator) < 0.3
        chosen[:, 1] = True  # at least one target per row
        labels = {"labels": ids.masked_fill(~chosen, -100)}
        if task == "AutoModelForPreTraining":
            labels["next_sentence_label"] = torch.randint(2, (batch,), generator=generator)
        return labels
    if task == "AutoModelForNextSentencePrediction":
        return {"labels": torch.randint(2, (batch,), generator=generator)}
    if task == "AutoModelForQuestionAnswering":
        return {"start_positions": torch.randint(length, (batch,), generator=generator),
                "end_positions": torch.randint(length, (batch,), generator=generator)}
    if task == "AutoModelForMultipleChoice":
        return {"labels": torch.randint(ids.shape[1], (batch,), generator=generator)}
    if task == "AutoModel":
        return {}
    raise ValueError(f"No labels known for task {task!r}")


def model_inputs(family: Family, config: Any, head: type, batch_size: int = 2, seq_length: int = 7, seed: int = 0,
                 labels: bool = True) -> dict[str, torch.Tensor]:
    """Forward kwargs for the model class ``head`` of ``family``: ``(batch_size, seq_length)`` ids (seeded) with
    an all-ones mask, and the head's labels unless ``labels=False``. A tagger's tags are ``O`` (0) or ``B-X``
    (1), always a valid BIO sequence."""
    generator = torch.Generator().manual_seed(seed)
    task = family.task_of(head)
    inputs = INPUT_KINDS[family.input_kind](config, task, batch_size, seq_length, generator)
    if not labels:
        return inputs
    if family.input_kind == "tagger" and task == "AutoModelForTokenClassification":
        return {**inputs, "labels": torch.randint(2, tuple(inputs["input_ids"].shape), generator=generator)}
    return {**inputs, **task_labels(task, config, inputs, generator)}
