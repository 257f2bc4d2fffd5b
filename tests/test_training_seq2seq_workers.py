"""train_seq2seq --preprocessing_num_workers: the training pairs are encoded by worker processes, into the
same ids as one process encodes."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.seq2seq import token_pairs
from hf_seqmodels.training.seq2seq.cli import parse_arguments, training_pairs
from hf_seqmodels.training.seq2seq.token_pairs import seq2seq_token_pairs

PAIRS = [(f"a b c {i} d e", f"x y {i} z") for i in range(50)]


@pytest.fixture
def tsv_and_tokenizer(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("source\ttarget\n" + "".join(f"{s}\t{t}\n" for s, t in PAIRS))
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{s}\n{t}\n" for s, t in PAIRS))
    return tsv, train_tokenizer([text], kind="word", vocab_size=100, min_frequency=1)


def test_worker_processes_encode_the_same_pairs_as_one_process(tsv_and_tokenizer, tmp_path, monkeypatch):
    tsv, tokenizer = tsv_and_tokenizer
    pools = []
    context = multiprocessing.get_context("spawn")

    class SpyContext:
        def Pool(self, processes):  # noqa: N802  (multiprocessing's name)
            pools.append(processes)
            return context.Pool(processes)

    monkeypatch.setattr(token_pairs.multiprocessing, "get_context", lambda name: SpyContext())
    one = seq2seq_token_pairs(tokenizer, str(tsv), pairs_per_call=7, cache_dir=tmp_path / "one")
    two = seq2seq_token_pairs(tokenizer, str(tsv), pairs_per_call=7, cache_dir=tmp_path / "two", num_proc=2)
    assert pools == [2] and one.pairs_read == two.pairs_read == len(PAIRS)
    assert len(one) == len(two) == len(PAIRS)
    for side in ("sources", "targets"):
        a, b = getattr(one, side), getattr(two, side)
        assert all(np.array_equal(np.asarray(a[i]), np.asarray(b[i])) for i in range(len(PAIRS)))


def test_the_flag_is_parsed_and_checked(tsv_and_tokenizer, tmp_path):
    tsv, tokenizer = tsv_and_tokenizer
    flags = ["--train_file", str(tsv), "--preset", "tiny", "--output_dir", str(tmp_path / "o")]
    args = parse_arguments([*flags, "--preprocessing_num_workers", "0"])
    merged = type("Args", (), {**vars(args[0]), **vars(args[1]), **vars(args[2])})
    with pytest.raises(ValueError, match="`--preprocessing_num_workers`=0"):
        training_pairs(merged, lambda: None, tokenizer, None, None)
