"""The token files of a ``datasets`` split are keyed by its contents (public ``datasets`` APIs only): the same
split maps the same files, a split with other texts, other rows or another order gets new ones."""

from __future__ import annotations

import datasets
import numpy as np
import pytest

from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.core.token_files import dataset_identity
from hf_seqmodels.training.lm.token_streams import lm_dataset_token_streams

TEXTS = [f"the cat {i} sat on the mat" for i in range(40)]


@pytest.fixture
def tokenizer(tmp_path):
    corpus = tmp_path / "tok.txt"
    corpus.write_text("\n".join(TEXTS) + "\nX\n")
    return train_tokenizer([corpus], kind="char", min_frequency=1)


def on_disk(tmp_path, texts: list[str], name: str) -> datasets.Dataset:
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp_path / name)
    return datasets.load_from_disk(tmp_path / name)


def folder_of(split, tokenizer, tmp_path):
    return lm_dataset_token_streams(split, tokenizer, validation_split_percentage=25.0,
                                    cache_dir=tmp_path / "cache").folder


def test_the_same_split_keeps_its_key_and_another_content_gets_another(tmp_path, tokenizer):
    split = on_disk(tmp_path, TEXTS, "a")
    assert split.cache_files, "a split read from Arrow files"
    first = folder_of(split, tokenizer, tmp_path)
    assert folder_of(on_disk(tmp_path, TEXTS, "a_again"), tokenizer, tmp_path).name != first.name  # other files
    assert folder_of(datasets.load_from_disk(tmp_path / "a"), tokenizer, tmp_path) == first  # reloaded: reused
    views = [split.shuffle(seed=0, keep_in_memory=True), split.select(range(30)),
             split.select(list(range(20, 40)) + list(range(20)))]
    folders = {folder_of(view, tokenizer, tmp_path) for view in views}
    assert len(folders) == 3 and first not in folders  # another order, fewer rows: other token files


def test_an_in_memory_split_is_keyed_by_every_text(tmp_path, tokenizer):
    split = datasets.Dataset.from_dict({"text": TEXTS})
    assert not split.cache_files
    changed = datasets.Dataset.from_dict({"text": TEXTS[:-1] + [TEXTS[-1] + "X"]})  # one character at the end
    assert dataset_identity(split, "text") == dataset_identity(datasets.Dataset.from_dict({"text": TEXTS}), "text")
    assert dataset_identity(split, "text") != dataset_identity(changed, "text")
    one, other = folder_of(split, tokenizer, tmp_path), folder_of(changed, tokenizer, tmp_path)
    assert one != other
    assert not np.array_equal(np.fromfile(one / "validation.bin", dtype=np.uint16),
                              np.fromfile(other / "validation.bin", dtype=np.uint16))
