"""A tokenizer trained on the user's files themselves (a prefix with TextFile, errors naming the file and line),
and trained once per run: the main process reads the text, the other processes load the saved tokenizer."""

from __future__ import annotations

import pytest

from hf_seqmodels.tokenization import TextFile, train_on_main_process, train_tokenizer

TEXT = "the cat sat on the mat\nthe dog ran\n" * 3 + "zebra quagga okapi\n"


def words(tokenizer) -> set[str]:
    return set(tokenizer.get_vocab())


def test_a_text_file_prefix_trains_on_its_first_characters_only(tmp_path):
    full = tmp_path / "full.txt"
    full.write_text(TEXT, encoding="utf-8")
    cut = TEXT.index("zebra") + 3  # the prefix ends inside "zebra"
    prefix = tmp_path / "prefix.txt"
    prefix.write_text(TEXT[:cut], encoding="utf-8")
    from_prefix = train_tokenizer([TextFile(full, max_chars=cut)], kind="word", min_frequency=1)
    assert words(from_prefix) == words(train_tokenizer([prefix], kind="word", min_frequency=1))
    assert "zeb" in words(from_prefix) and "okapi" not in words(from_prefix)
    assert "okapi" in words(train_tokenizer([TextFile(full)], kind="word", min_frequency=1))


def test_errors_name_the_users_file_and_line(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{bad.name}.*not UTF-8.*byte offset 3"):
        train_tokenizer([TextFile(bad, max_chars=100)], kind="word", min_frequency=1)
    long = tmp_path / "long.txt"
    long.write_text("short line\n" + "x" * 50 + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{long.name}'?, line 2: 50 characters"):
        train_tokenizer([TextFile(long, max_chars=40)], kind="word", min_frequency=1, max_line_length=20)
    blank = tmp_path / "blank_start.txt"
    blank.write_text("   \n\nwords later\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{blank.name}.*empty: its first 5 characters hold only whitespace"):
        train_tokenizer([TextFile(blank, max_chars=5)], kind="word", min_frequency=1)
    with pytest.raises(ValueError, match="max_chars=-1"):
        TextFile(blank, max_chars=-1)


def test_train_on_main_process_saves_and_loads_and_reuses(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    calls = []

    def train():
        calls.append(1)
        return train_tokenizer([corpus], kind="word", min_frequency=1)

    tokenizer = train_on_main_process(tmp_path / "out", train)
    assert calls == [1] and (tmp_path / "out" / "tokenizer.json").is_file() and "okapi" in words(tokenizer)
    again = train_on_main_process(tmp_path / "out", lambda: pytest.fail("trained again"), reuse=True)
    assert again.get_vocab() == tokenizer.get_vocab()
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        train_on_main_process(tmp_path / "none", train, reuse=True)


CHILD = """
import sys
from accelerate import Accelerator
from hf_seqmodels.tokenization import TextFile, train_on_main_process, train_tokenizer

from distributed_utils import rank_logger

accelerator = Accelerator(cpu=True)
say = rank_logger()


def trainer(path):
    def train():
        say(f"reads {path}")
        return train_tokenizer([TextFile(path)], kind="word", min_frequency=1)
    return train

tokenizer = train_on_main_process(sys.argv[3], trainer(sys.argv[1]), accelerator)
say(f"vocabulary {sorted(tokenizer.get_vocab().items())}")
try:
    train_on_main_process(sys.argv[4], trainer(sys.argv[2]), accelerator)
except Exception as error:
    say(f"error {type(error).__name__}: {error}")
"""


@pytest.mark.slow
def test_two_processes_read_the_text_once(tmp_path):
    """Under ``accelerate launch`` with 2 CPU processes only rank 0 reads the text; both get its tokenizer, and
    an error in the user's file reaches both processes (naming the file on rank 0) instead of a hang."""
    from distributed_utils import launch_child_script

    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(TEXT, encoding="utf-8")
    bad.write_bytes(b"ok\n\xff\n")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    lines = launch_child_script(script, [str(good), str(bad), str(tmp_path / "out1"), str(tmp_path / "out2")], tmp_path)
    assert sorted(line for line in lines if " reads " in line) == [f"rank 0 reads {bad}", f"rank 0 reads {good}"]
    vocabularies = sorted(line for line in lines if " vocabulary " in line)
    assert len(vocabularies) == 2 and vocabularies[0].split(" ", 2)[2] == vocabularies[1].split(" ", 2)[2]
    errors = sorted(line for line in lines if " error " in line)
    assert len(errors) == 2 and "ValueError" in errors[0] and "bad.txt" in errors[0] and "not UTF-8" in errors[0]
    assert errors[1].startswith("rank 1 error RuntimeError: The main process failed")


def test_lm_trains_its_tokenizer_on_the_training_part_of_the_file(tmp_path):
    from hf_seqmodels.training.core.text import split_for_validation
    from hf_seqmodels.training.lm.data import tokenizer_training_files

    corpus = tmp_path / "train.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    (file,) = tokenizer_training_files(corpus, validation_split_percentage=25.0)
    train_text, _ = split_for_validation([TEXT], 25.0)
    assert file == TextFile(corpus, max_chars=len(train_text[0]))
    reference = tmp_path / "reference.txt"
    reference.write_text(train_text[0], encoding="utf-8")
    trained = train_tokenizer([file], kind="char", min_frequency=1)
    assert trained.get_vocab() == train_tokenizer([reference], kind="char", min_frequency=1).get_vocab()
    assert tokenizer_training_files(corpus, validation_file=corpus) == [TextFile(corpus)]


def test_bert_trains_its_tokenizer_on_the_documents_not_held_out(tmp_path):
    from hf_seqmodels.training.bert.data import split_documents, tokenizer_training_texts

    text = "One. Two sentences here.\nSame doc.\n\nSecond doc.\n\nThird doc! Yes.\n\nFourth doc.\n"
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text(text, encoding="utf-8")
    second.write_text("Fifth doc.\n", encoding="utf-8")
    documents = split_documents(text) + split_documents("Fifth doc.\n")
    texts = list(tokenizer_training_texts([first, second], held_out=lambda count: count // 2))
    assert len(documents) == 5 and texts == [sentence + "\n" for d in documents[:3] for sentence in d]


def test_bert_trains_its_tokenizer_on_an_article_longer_than_a_tokenizer_line(tmp_path):
    """A WikiText article runs past the tokenizer trainer's 100,000-character line limit: its sentences are the
    lines the tokenizer reads, so pretraining on it trains a tokenizer instead of failing."""
    from hf_seqmodels.tokenization.corpus import DEFAULT_MAX_LINE_LENGTH
    from hf_seqmodels.tokenization.training import train_tokenizer
    from hf_seqmodels.training.bert.data import tokenizer_training_texts

    paragraph = "the lobster is a species of crustacean found in the eastern atlantic . " * 20
    article = tmp_path / "wiki.txt"
    article.write_text(" = Lobster = \n" + "\n".join([paragraph] * 120) + "\n = Crab = \nA crab.\n", encoding="utf-8")
    assert article.stat().st_size > DEFAULT_MAX_LINE_LENGTH
    texts = tokenizer_training_texts([article], held_out=lambda count: 1)
    tokenizer = train_tokenizer([], texts=texts, kind="wordpiece", vocab_size=200, min_frequency=1)
    assert "lobster" in tokenizer.get_vocab() and "crab" not in tokenizer.get_vocab()


def test_seq2seq_trains_on_the_aligned_files_or_streams_the_sentences(tmp_path):
    from hf_seqmodels.training.seq2seq.data import tokenizer_training_text

    source, target, tsv = tmp_path / "train.en", tmp_path / "train.de", tmp_path / "train.tsv"
    source.write_text("a cat\nthe dog\n", encoding="utf-8")
    target.write_text("eine Katze\nder Hund\n", encoding="utf-8")
    tsv.write_text("en\tde\na cat\teine Katze\nthe dog\tder Hund\n", encoding="utf-8")
    files, texts = tokenizer_training_text(("sources", "targets"), source_file=str(source), target_file=str(target))
    assert files == [TextFile(str(source)), TextFile(str(target))] and list(texts) == []
    files, texts = tokenizer_training_text(("targets",), str(tsv), source_field="en", target_field="de")
    assert files == [] and list(texts) == ["eine Katze\n", "der Hund\n"]
    files, texts = tokenizer_training_text(("sources", "targets"), source_file=str(source), target_file=str(target),
                                           max_pairs=1)
    assert files == [] and list(texts) == ["a cat\n", "eine Katze\n"]


def test_texts_are_read_as_the_lines_of_one_file(tmp_path):
    from hf_seqmodels.tokenization.training import _text_lines

    texts = ["a b\nc", "d\r", "\ne\rf\n", "", "g"]
    as_file = tmp_path / "joined.txt"
    as_file.write_text("".join(texts), encoding="utf-8", newline="")
    with open(as_file, encoding="utf-8", newline="") as handle:
        assert list(_text_lines(texts)) == handle.readlines() == ["a b\n", "cd\r\n", "e\r", "f\n", "g"]
    trained = train_tokenizer(texts=iter(texts), kind="char", min_frequency=1)
    assert trained.get_vocab() == train_tokenizer([as_file], kind="char", min_frequency=1).get_vocab()
    with pytest.raises(ValueError, match="training text, row 2: 31 characters"):
        train_tokenizer(texts=["short\n", "y" * 30 + "\n"], kind="word", min_frequency=1, max_line_length=20)
    with pytest.raises(ValueError, match="No training text"):
        train_tokenizer(kind="word")


def test_a_missing_lm_training_file_is_named(tmp_path):
    from hf_seqmodels.training.lm.data import tokenizer_training_files

    with pytest.raises(FileNotFoundError, match=r"Text file '.*nope.txt' does not exist"):
        tokenizer_training_files(tmp_path / "nope.txt")
