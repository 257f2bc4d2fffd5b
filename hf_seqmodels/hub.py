"""Sharing on the Hub, by its earlier single name: the model cards (:mod:`hf_seqmodels.cards`) and publishing
(:mod:`hf_seqmodels.publishing`). ``from hf_seqmodels.hub import save_for_hub, push_folder_to_hub`` keeps
working."""

from .cards import (
           SOURCE_TOKENIZER_FOLDER,
           model_index_results,
           save_for_hub,
           summarize_results,
           write_model_card,
)
from .publishing import (
           PUSH_ALLOW_PATTERNS,
           PushError,
           files_to_push,
           format_file_list,
           push_folder_to_hub,
           stage_push_folder,
)

__all__ = ["PUSH_ALLOW_PATTERNS", "PushError", "SOURCE_TOKENIZER_FOLDER", "files_to_push", "format_file_list",
           "model_index_results", "push_folder_to_hub", "save_for_hub", "stage_push_folder", "summarize_results",
           "write_model_card"]
