"""train_lm --dataset_name goes through token files too: the splits' memory-mapped Arrow files are tokenised
once, a batch of examples at a time, into the same ids as the in-RAM path (local dataset folders, offline)."""

from __future__ import annotations

import numpy as np
import pytest

from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.core.text import load_dataset_splits, load_text_splits, tokenize_texts
from hf_seqmodels.training.lm import token_streams
from hf_seqmodels.training.lm.cli import main
from hf_seqmodels.training.lm.token_streams import dataset_train_texts, lm_dataset_token_streams

TRAIN = "".join(f"the cat {i} sat on the mat\n" for i in range(60))
VALIDATION = "".join(f"a dog {i} ran\n" for i in range(10))


@pytest.fixture
def tokenizer(tmp_path):
    corpus = tmp_path / "tok.txt"
    corpus.write_text(TRAIN + VALIDATION)
    return train_tokenizer([corpus], kind="char", min_frequency=1)


def dataset_folder(tmp_path, with_validation: bool):
    folder = tmp_path / ("two_splits" if with_validation else "one_split")
    folder.mkdir()
    (folder / "train.txt").write_text(TRAIN)
    if with_validation:
        (folder / "validation.txt").write_text(VALIDATION)
    return folder


@pytest.mark.parametrize("with_validation", [True, False])
def test_dataset_streams_equal_the_in_ram_tokenisation(tmp_path, tokenizer, with_validation):
    folder = dataset_folder(tmp_path, with_validation)
    train, validation = load_dataset_splits(str(folder), None, "text")
    streams = lm_dataset_token_streams(train, tokenizer, validation=validation, validation_split_percentage=20.0,
                                       lines_per_chunk=7, cache_dir=tmp_path / "cache")
    texts = load_text_splits(dataset_name=str(folder), validation_split_percentage=20.0)
    assert np.array_equal(streams.train, tokenize_texts(texts.train, tokenizer, lines_per_chunk=7).numpy())
    assert np.array_equal(streams.validation, tokenize_texts(texts.validation, tokenizer, lines_per_chunk=7).numpy())
    held_out = None if with_validation else 20.0
    assert "".join(dataset_train_texts(train, "text", held_out)) == "".join(texts.train)


def test_dataset_streams_are_cached(tmp_path, tokenizer, monkeypatch):
    train, validation = load_dataset_splits(str(dataset_folder(tmp_path, True)), None, "text")
    first = lm_dataset_token_streams(train, tokenizer, validation=validation, cache_dir=tmp_path / "cache")
    monkeypatch.setattr(token_streams, "_write_stream", lambda *args: pytest.fail("tokenised again"))
    again = lm_dataset_token_streams(train, tokenizer, validation=validation, cache_dir=tmp_path / "cache")
    assert again.folder == first.folder and np.array_equal(again.train, first.train)


def test_train_lm_on_a_dataset_trains_its_tokenizer_and_token_files(tmp_path):
    folder = dataset_folder(tmp_path, True)
    results = main(["--dataset_name", str(folder), "--tokenizer_kind", "char", "--min_frequency", "1",
                    "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "cell_type=lstm,hidden_size=8",
                    "--max_steps", "1", "--per_device_train_batch_size", "2", "--block_size", "8", "--optim", "sgd",
                    "--disable_tqdm", "--no_plot", "--output_dir", str(tmp_path / "out"),
                    "--cache_dir", str(tmp_path / "cache")])
    assert results["steps"] == 1 and (tmp_path / "out" / "tokenizer.json").is_file()
    assert [p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()] == ["lm"]
