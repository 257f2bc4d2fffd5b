"""Pipelines for the package's sequence-to-sequence models.

transformers 5 removed its ``translation`` and ``text2text-generation`` tasks, so ``import hf_seqmodels``
registers :class:`TranslationPipeline` as ``hfsm-translation`` for every ``AutoModelForSeq2SeqLM``::

    translate = pipeline("hfsm-translation", model=folder, trust_remote_code=True)
    translate("a source sentence", num_beams=5, max_new_tokens=50)  # [{"translation_text": "..."}]
"""

from __future__ import annotations

from transformers import AutoModelForSeq2SeqLM, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

TRANSLATION_TASK = "hfsm-translation"


class TranslationPipeline(Pipeline):
    """Source text in, ``{"translation_text": ...}`` out; keyword arguments go to ``model.generate``."""

    _pipeline_calls_generate = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(self, clean_up_tokenization_spaces=None, **generate_kwargs):
        postprocess = {}
        if clean_up_tokenization_spaces is not None:
            postprocess["clean_up_tokenization_spaces"] = clean_up_tokenization_spaces
        return {}, generate_kwargs, postprocess

    def preprocess(self, text: str):
        if not isinstance(text, str):
            raise ValueError(f"{TRANSLATION_TASK} translates strings, got {type(text).__name__}.")
        return self.tokenizer(text, return_tensors="pt")

    def _forward(self, model_inputs, **generate_kwargs):
        model_inputs.pop("token_type_ids", None)
        return {"output_ids": self.model.generate(**model_inputs, **self._prepare_generate_kwargs(generate_kwargs))}

    def postprocess(self, model_outputs, clean_up_tokenization_spaces=True):
        return [
            {"translation_text": self.tokenizer.decode(ids, skip_special_tokens=True,
                                                       clean_up_tokenization_spaces=clean_up_tokenization_spaces)}
            for ids in model_outputs["output_ids"]
        ]


def register_pipelines() -> None:
    """Make ``pipeline("hfsm-translation", ...)`` available (run by ``import hf_seqmodels``)."""
    if TRANSLATION_TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(TRANSLATION_TASK, pipeline_class=TranslationPipeline,
                                            pt_model=AutoModelForSeq2SeqLM, type="text")


__all__ = ["TRANSLATION_TASK", "TranslationPipeline", "register_pipelines"]
