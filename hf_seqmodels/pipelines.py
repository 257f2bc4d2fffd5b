"""Pipelines for tasks that transformers 5 removed: translation, text-to-text generation, summarisation and
extractive question answering.

``import hf_seqmodels`` registers :class:`TranslationPipeline` as ``hfsm-translation``,
:class:`Text2TextGenerationPipeline` as ``hfsm-text2text-generation`` and :class:`SummarizationPipeline` as
``hfsm-summarization`` for every ``AutoModelForSeq2SeqLM``, and :class:`QuestionAnsweringPipeline` as
``hfsm-question-answering`` for every ``AutoModelForQuestionAnswering``.

Every folder a model of the package is saved to (``save_pretrained``, thus ``Trainer.save_model``, the
training scripts and ``cards.save_for_hub``; :func:`pipelines_save_hook`) carries the tasks that run its head in
its ``config.json`` (``custom_pipelines``) and this module's code beside the model's, so the pipelines also run
where the package is not installed, as transformers' custom pipelines do. ``pipeline()`` then asks for
``trust_remote_code=True``, with or without the package::

    translate = pipeline("hfsm-translation", model=folder, trust_remote_code=True)
    translate("a source sentence", num_beams=5, max_new_tokens=50)  # [{"translation_text": "..."}]
    # separate source/target vocabularies: the source tokenizer comes from folder/source_tokenizer/,
    # or pass it: pipeline("hfsm-translation", model=folder, source_tokenizer=source_folder)

    qa = pipeline("hfsm-question-answering", model=folder, trust_remote_code=True)
    qa(question="Who wrote it?", context="It was written by Ada.")  # {"answer": "Ada", "score": ..., "start": 18, "end": 21}
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import (
    MODEL_FOR_QUESTION_ANSWERING_MAPPING,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    Pipeline,
)
from transformers.dynamic_module_utils import custom_object_save
from transformers.pipelines import PIPELINE_REGISTRY

# This module is also saved beside a model as remote code (save_pipelines), where it may import only the
# standard library, torch, transformers and its sibling modules (here qa_spans): nothing else of the package.
from .qa_spans import best_spans

TRANSLATION_TASK = "hfsm-translation"
TEXT2TEXT_TASK = "hfsm-text2text-generation"
SUMMARIZATION_TASK = "hfsm-summarization"
QUESTION_ANSWERING_TASK = "hfsm-question-answering"
SOURCE_TOKENIZER_FOLDER = "source_tokenizer"  # the same name as cards.SOURCE_TOKENIZER_FOLDER


class Text2TextGenerationPipeline(Pipeline):
    """Source text in, ``{"generated_text": ...}`` out (one dict per returned sequence); keyword arguments go
    to ``model.generate`` (``num_beams``, ``max_new_tokens``, ``num_return_sequences``, ...).

    ``tokenizer`` is the target side's: it decodes the output. A model with separate source and target
    vocabularies (``config.source_vocab_size`` set) encodes its input with ``source_tokenizer``: a tokenizer
    or a folder/Hub name, by default the ``source_tokenizer/`` subfolder of the folder the model was loaded
    from. With one shared vocabulary ``tokenizer`` encodes the source too.
    """

    task_name = TEXT2TEXT_TASK
    output_key = "generated_text"
    _pipeline_calls_generate = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __init__(self, *args, source_tokenizer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.source_tokenizer = self._resolve_source_tokenizer(source_tokenizer)

    def _resolve_source_tokenizer(self, source_tokenizer):
        """The tokenizer of the source side: ``source_tokenizer``, the saved one, or the shared ``tokenizer``."""
        config = self.model.config
        source_vocab_size = getattr(config, "source_vocab_size", None)
        if source_vocab_size is None:
            if source_tokenizer is not None:
                raise ValueError(f"{self.task_name}: this model shares one vocabulary between source and target "
                                 "(config.source_vocab_size=None), so it takes no `source_tokenizer`; its tokenizer "
                                 "encodes the source.")
            return self.tokenizer
        if source_tokenizer is None:
            source_tokenizer = self._saved_source_tokenizer()
        if isinstance(source_tokenizer, (str, Path)):
            source_tokenizer = AutoTokenizer.from_pretrained(source_tokenizer)
        if source_tokenizer is None:
            raise ValueError(
                f"{self.task_name}: this model has separate source and target vocabularies (config.source_vocab_size="
                f"{source_vocab_size}, vocab_size={config.vocab_size}) and no source tokenizer was found in "
                f"{config.name_or_path!r}/{SOURCE_TOKENIZER_FOLDER}: pass `source_tokenizer=` (a tokenizer or its "
                "folder) to pipeline().")
        return source_tokenizer

    def _saved_source_tokenizer(self):
        """The tokenizer in the ``source_tokenizer/`` subfolder of the model's folder or Hub repository, or None."""
        name = self.model.config.name_or_path
        if not name:
            return None
        if Path(name).is_dir():
            folder = Path(name) / SOURCE_TOKENIZER_FOLDER
            return AutoTokenizer.from_pretrained(folder) if folder.is_dir() else None
        try:
            return AutoTokenizer.from_pretrained(name, subfolder=SOURCE_TOKENIZER_FOLDER)
        except OSError:
            return None

    def _sanitize_parameters(self, clean_up_tokenization_spaces=None, **generate_kwargs):
        postprocess = {}
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return {}, generate_kwargs, postprocess

    def preprocess(self, text: str):
        if not isinstance(text, str):
            raise ValueError(f"{self.task_name} takes a string (or a list of strings), got {type(text).__name__}.")
        # encoded as in training (seq2seq_data.encode_corpus): the tokens without special tokens, then <eos>
        ids = self.source_tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.source_tokenizer.eos_token_id is not None:
            ids = ids + [self.source_tokenizer.eos_token_id]
        return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}

    def _forward(self, model_inputs, **generate_kwargs):
        model_inputs.pop("token_type_ids", None)
        return {"output_ids": self.model.generate(**model_inputs, **self._prepare_generate_kwargs(generate_kwargs))}

    def postprocess(self, model_outputs, clean_up_tokenization_spaces=True):
        return [
            {self.output_key: self.tokenizer.decode(ids, skip_special_tokens=True,
                                                       clean_up_tokenization_spaces=clean_up_tokenization_spaces)}
            for ids in model_outputs["output_ids"]
        ]


class TranslationPipeline(Text2TextGenerationPipeline):
    """Source text in, ``{"translation_text": ...}`` out; as :class:`Text2TextGenerationPipeline`."""

    task_name = TRANSLATION_TASK
    output_key = "translation_text"


class SummarizationPipeline(Text2TextGenerationPipeline):
    """Document in, ``{"summary_text": ...}`` out; as :class:`Text2TextGenerationPipeline`."""

    task_name = SUMMARIZATION_TASK
    output_key = "summary_text"


class QuestionAnsweringPipeline(Pipeline):
    r"""Extractive question answering with a span-prediction model (e.g. ``BertForQuestionAnswering``).

    Input: ``qa(question=..., context=...)``, a dict ``{"question", "context"}`` or a list of dicts. The pair
    is encoded as ``[CLS] question [SEP] context [SEP]``; a context longer than ``max_seq_len`` tokens is
    cut into windows overlapping by ``doc_stride`` tokens, all scored in one batch. The answer is the span
    ``i <= j < i + max_answer_len`` of context tokens with the highest :math:`p_{start}(i)\,p_{end}(j)`
    (softmax over the window's context tokens; :func:`hf_seqmodels.qa_spans.best_spans`). Output:
    ``{"answer", "score", "start", "end"}`` with character offsets into the context (a list of ``top_k`` such
    dicts when ``top_k > 1``). Needs a fast tokenizer (for the offsets); use ``batch_size=1`` (the windows of
    one question are already a batch).
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def __call__(self, inputs=None, question: str | None = None, context: str | None = None, **kwargs):
        if inputs is None:
            inputs = {"question": question, "context": context}
        return super().__call__(inputs, **kwargs)

    def _sanitize_parameters(self, top_k=None, max_answer_len=None, max_seq_len=None, doc_stride=None):
        preprocess = {k: v for k, v in (("max_seq_len", max_seq_len), ("doc_stride", doc_stride)) if v is not None}
        postprocess = {k: v for k, v in (("top_k", top_k), ("max_answer_len", max_answer_len)) if v is not None}
        return preprocess, {}, postprocess

    def preprocess(self, inputs: dict, max_seq_len: int | None = None, doc_stride: int | None = None):
        if not isinstance(inputs, dict) or not all(isinstance(inputs.get(k), str) for k in ("question", "context")):
            raise ValueError(f"{QUESTION_ANSWERING_TASK} needs a string `question` and a string `context`.")
        if max_seq_len is None:
            max_seq_len = min(384, self.tokenizer.model_max_length, self.model.config.max_position_embeddings)
        doc_stride = max_seq_len // 4 if doc_stride is None else doc_stride
        encoded = self.tokenizer(
            inputs["question"], inputs["context"], truncation="only_second", max_length=max_seq_len,
            stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True, padding=True,
            return_tensors="pt",
        )
        windows = encoded["input_ids"].shape[0]
        context_mask = torch.tensor(  # (windows, T): True on the context's tokens
            [[sequence == 1 for sequence in encoded.sequence_ids(w)] for w in range(windows)]
        )
        if not context_mask.any():
            raise ValueError(f"{QUESTION_ANSWERING_TASK} needs a context with at least one token, got "
                             f"{inputs['context']!r}.")
        model_inputs = {k: encoded[k] for k in self.tokenizer.model_input_names if k in encoded}
        return {**model_inputs, "offset_mapping": encoded["offset_mapping"], "context_mask": context_mask,
                "context": inputs["context"]}

    def _forward(self, model_inputs):
        extra = {k: model_inputs.pop(k) for k in ("offset_mapping", "context_mask", "context")}
        out = self.model(**model_inputs)
        return {"start_logits": out.start_logits, "end_logits": out.end_logits, **extra}

    def postprocess(self, outputs, top_k: int = 1, max_answer_len: int = 15):
        spans = best_spans(outputs["start_logits"], outputs["end_logits"], outputs["context_mask"],
                           max_answer_len=max_answer_len, top_k=top_k)
        answers = []
        for span in spans:
            char_start = int(outputs["offset_mapping"][span.window, span.start, 0])
            char_end = int(outputs["offset_mapping"][span.window, span.end, 1])
            answers.append({"score": span.score, "start": char_start, "end": char_end,
                            "answer": outputs["context"][char_start:char_end]})
        return answers[0] if top_k == 1 else answers


#: ``{task: (pipeline class, the Auto class whose models it runs)}``
PIPELINE_TASKS = {
    TRANSLATION_TASK: (TranslationPipeline, AutoModelForSeq2SeqLM),
    TEXT2TEXT_TASK: (Text2TextGenerationPipeline, AutoModelForSeq2SeqLM),
    SUMMARIZATION_TASK: (SummarizationPipeline, AutoModelForSeq2SeqLM),
    QUESTION_ANSWERING_TASK: (QuestionAnsweringPipeline, AutoModelForQuestionAnswering),
}

#: the {config class: model class} mapping of each Auto class above (registrations included)
MODEL_MAPPINGS = {AutoModelForSeq2SeqLM: MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING,
                  AutoModelForQuestionAnswering: MODEL_FOR_QUESTION_ANSWERING_MAPPING}


def register_pipelines() -> None:
    """Make ``pipeline(task, ...)`` available for every task of :data:`PIPELINE_TASKS` (run by
    ``import hf_seqmodels``)."""
    tasks = PIPELINE_REGISTRY.get_supported_tasks()
    for task, (pipeline_class, auto_class) in PIPELINE_TASKS.items():
        if task not in tasks:
            PIPELINE_REGISTRY.register_pipeline(task, pipeline_class=pipeline_class, pt_model=auto_class, type="text")


def custom_pipelines_for(model) -> dict[str, dict]:
    """The ``custom_pipelines`` entries of ``config.json`` for the tasks that run ``model``: those whose Auto
    class maps the model's config class to the model's own class (a seq2seq LM serves translation, text-to-text
    generation and summarisation, a question-answering head serves question answering; a base model none).

    Each entry is ``{"impl": "pipelines.<Class>", "pt": ["<Auto class>"], "type": "text"}``, the form that
    transformers' ``Pipeline.save_pretrained`` writes and ``pipeline(..., trust_remote_code=True)`` reads.
    """
    return _entries_for(type(model.config), type(model).__name__)


def _entries_for(config_class, model_class_name: str) -> dict[str, dict]:
    """:func:`custom_pipelines_for` of the head called ``model_class_name`` with a config of ``config_class``."""
    entries = {}
    for task, (pipeline_class, auto_class) in PIPELINE_TASKS.items():
        mapping = MODEL_MAPPINGS[auto_class]
        if config_class in mapping and mapping[config_class].__name__ == model_class_name:
            module = pipeline_class.__module__.rsplit(".", 1)[-1]
            entries[task] = {"impl": f"{module}.{pipeline_class.__name__}", "pt": [auto_class.__name__],
                             "type": "text"}
    return entries


def _share(config_class, model_class_name: str, declared, save_directory: str | Path) -> dict[str, dict]:
    """The ``custom_pipelines`` of a folder that the head ``model_class_name`` is saved to: the tasks of
    :data:`PIPELINE_TASKS` that run it, and the other tasks already ``declared`` (entries kept as they are;
    anything but a dict of entries counts as none). Copies this module with its relative imports into
    ``save_directory`` when one of our tasks runs the head."""
    kept = {}
    if isinstance(declared, dict):
        kept = {task: entry for task, entry in declared.items() if task not in PIPELINE_TASKS}
    ours = _entries_for(config_class, model_class_name)
    if ours:
        custom_object_save(TranslationPipeline, save_directory)  # this file and its relative imports
    return {**kept, **ours}


def pipelines_save_hook(config, save_directory: str) -> dict[str, dict | None]:
    """The save hook (``config_utils.add_save_hook``) that makes every ``save_pretrained`` of the package's
    models (``Trainer.save_model`` and the training scripts' final saves included) write the pipelines that
    run the saved head: its ``custom_pipelines`` entries and this module's code. The head is the one
    ``PreTrainedModel.save_pretrained`` names in ``config.architectures`` just before it saves the config."""
    architectures = getattr(config, "architectures", None) or [None]
    entries = _share(type(config), architectures[0], getattr(config, "custom_pipelines", None), save_directory)
    return {"custom_pipelines": entries or None}


def save_pipelines(model, save_directory: str | Path) -> list[str]:
    """Make the pipelines that run ``model`` shareable from ``save_directory``, a folder ``model`` was saved to
    by other means than ``model.save_pretrained`` (which does it itself, :func:`pipelines_save_hook`).

    Sets ``custom_pipelines`` (:func:`custom_pipelines_for`, with entries of other tasks kept) in the folder's
    ``config.json`` and copies this module with its sibling ``qa_spans.py`` beside the model's code, so that
    ``pipeline("hfsm-translation", model=folder, trust_remote_code=True)`` works without the package. Returns
    the tasks written (none for a model that no pipeline of :data:`PIPELINE_TASKS` runs).
    """
    config_file = Path(save_directory) / "config.json"
    if not config_file.is_file():
        raise ValueError(f"save_pipelines: save_directory={str(save_directory)!r} has no config.json; call "
                         "model.save_pretrained(save_directory) first.")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    entries = _share(type(model.config), type(model).__name__, config.pop("custom_pipelines", None), save_directory)
    if entries:
        config["custom_pipelines"] = entries
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return sorted(task for task in entries if task in PIPELINE_TASKS)


__all__ = [
    "PIPELINE_TASKS",
    "QUESTION_ANSWERING_TASK",
    "QuestionAnsweringPipeline",
    "SUMMARIZATION_TASK",
    "SummarizationPipeline",
    "TEXT2TEXT_TASK",
    "TRANSLATION_TASK",
    "Text2TextGenerationPipeline",
    "TranslationPipeline",
    "custom_pipelines_for",
    "pipelines_save_hook",
    "register_pipelines",
    "save_pipelines",
]
