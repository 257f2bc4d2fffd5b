"""Tests for hf_seqmodels.tokenization: cleaning, the five tokenizer kinds, saving/reloading and the CLI.

Tiny corpora are written to tmp_path; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_seqmodels.tokenization import (
    BERT_SPECIAL_TOKENS,
    SPECIAL_TOKENS,
    TOKENIZER_KINDS,
    CleaningConfig,
    build_normalizer,
    clean_text,
    train_tokenizer,
)
from hf_seqmodels.tokenization.cli import build_parser, main

REPO_ROOT = Path(__file__).resolve().parents[1]

CORPUS = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\n"
    "the cat sat on the mat. the dog sat on the log. a cat and a dog.\n"
    "北京欢迎你。我们在北京。\n"
) * 4
SAMPLES = ["First Citizen:\nBefore we proceed", "the cat sat on the log.", "北京欢迎你", "zebra ☃ qx"]
VOCAB_SIZE = {"word": 200, "char": 200, "bpe": 400, "wordpiece": 200, "unigram": 120}


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(corpus_file: Path) -> dict[str, PreTrainedTokenizerFast]:
    """One tokenizer per kind, trained once for the module."""
    return {
        kind: train_tokenizer([corpus_file], kind=kind, vocab_size=VOCAB_SIZE[kind], min_frequency=1)
        for kind in TOKENIZER_KINDS
    }


def write(tmp_path: Path, text: str, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# Every kind: special tokens, save/reload, unknowns
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_special_tokens_have_fixed_ids(trained, kind):
    tok = trained[kind]
    assert tok.convert_tokens_to_ids(SPECIAL_TOKENS) == [0, 1, 2, 3]
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2, 3)
    assert tok.padding_side == "right"
    assert len(tok) > len(SPECIAL_TOKENS)


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_save_and_reload_with_auto_tokenizer(trained, kind, tmp_path):
    tok = trained[kind]
    tok.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded.get_vocab() == tok.get_vocab()
    assert reloaded.all_special_ids == tok.all_special_ids
    for text in SAMPLES:
        assert reloaded(text).input_ids == tok(text).input_ids
        assert reloaded.decode(tok(text).input_ids) == tok.decode(tok(text).input_ids)
    batch, batch_again = tok(SAMPLES, padding=True), reloaded(SAMPLES, padding=True)
    assert batch.input_ids == batch_again.input_ids
    assert batch.attention_mask == batch_again.attention_mask


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_causal_template_adds_bos_only(trained, kind):
    tok = trained[kind]
    plain = tok("the cat", add_special_tokens=False).input_ids
    assert tok("the cat").input_ids == [2, *plain]
    pair = tok("the cat", "a dog")
    assert pair.input_ids == [2, *plain, 3, *tok("a dog", add_special_tokens=False).input_ids]
    assert "token_type_ids" not in pair


@pytest.mark.parametrize("kind", ["word", "char", "wordpiece", "unigram"])
def test_unknown_symbols_map_to_unk(trained, kind):
    tok = trained[kind]
    ids = tok("☃", add_special_tokens=False).input_ids
    pieces = [i for i in ids if tok.convert_ids_to_tokens(i) != "▁"]  # Metaspace's word-start marker
    assert pieces == [tok.unk_token_id]
    if kind == "word":
        assert tok("the zebra", add_special_tokens=False).input_ids[1] == tok.unk_token_id


def test_byte_level_bpe_never_produces_unk_and_round_trips(trained):
    tok = trained["bpe"]
    text = "zebra ☃ 日本語\n\ttabs  and  spaces"
    ids = tok(text, add_special_tokens=False).input_ids
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_padding_is_on_the_right_with_pad_id_zero(trained):
    batch = trained["word"](["the cat", "the cat sat on the mat"], padding=True)
    short, long = batch.input_ids
    assert len(short) == len(long)
    assert short[-1] == 0 and batch.attention_mask[0][-1] == 0 and batch.attention_mask[0][0] == 1


# --------------------------------------------------------------------------------------------------
# Kind-specific behaviour
# --------------------------------------------------------------------------------------------------


def test_char_level_round_trips_exactly_including_newlines(trained):
    tok = trained["char"]
    text = "First Citizen:\nBefore we proceed any further,  hear me speak.\n\nAll:\n"
    ids = tok(text, add_special_tokens=False).input_ids
    assert len(ids) == len(text)  # one token per character, whitespace included
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text
    assert tok.decode(tok(text).input_ids, skip_special_tokens=True) == text
    assert tok.convert_ids_to_tokens(ids[:7]) == list("First C")


def test_word_level_respects_min_frequency_and_vocab_cap(tmp_path):
    path = write(tmp_path, "the the the cat cat dog\n")
    frequent = train_tokenizer([path], kind="word", vocab_size=100, min_frequency=2)
    assert "cat" in frequent.get_vocab() and "dog" not in frequent.get_vocab()
    capped = train_tokenizer([path], kind="word", vocab_size=5, min_frequency=1)
    assert len(capped) == 5 and "the" in capped.get_vocab()  # the most frequent word survives the cap


def test_char_vocab_size_is_a_cap(tmp_path):
    path = write(tmp_path, "aaaa bbb cc d\n")
    tok = train_tokenizer([path], kind="char", vocab_size=6, min_frequency=1)
    assert len(tok) == 6
    assert tok.convert_ids_to_tokens(tok("ad", add_special_tokens=False).input_ids) == ["a", "<unk>"]


def test_wordpiece_uses_continuation_prefix(trained):
    tokens = trained["wordpiece"].tokenize("famished")
    assert len(tokens) > 1 and all(t.startswith("##") for t in tokens[1:])


def test_unigram_handles_text_without_spaces(trained):
    tok = trained["unigram"]
    ids = tok("北京欢迎你", add_special_tokens=False).input_ids
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == "北京欢迎你"
    assert type(tok.backend_tokenizer.pre_tokenizer).__name__ == "Metaspace"


def test_trains_from_a_datasets_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"text": ["the cat sat", None, "the dog sat"], "label": [0, 1, 2]})
    tok = train_tokenizer(dataset=data, kind="word", vocab_size=50, min_frequency=1)
    assert {"the", "cat", "dog", "sat"} <= set(tok.get_vocab())
    with pytest.raises(ValueError, match="text_column='content'.*columns"):
        train_tokenizer(dataset=data, text_column="content", kind="word")


def test_model_max_length_is_saved(tmp_path, corpus_file):
    tok = train_tokenizer([corpus_file], kind="char", vocab_size=100, min_frequency=1, model_max_length=64)
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path).model_max_length == 64


# --------------------------------------------------------------------------------------------------
# BERT special tokens
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["wordpiece", "word"])
def test_bert_special_tokens_and_token_type_ids(corpus_file, tmp_path, kind):
    tok = train_tokenizer(
        [corpus_file], kind=kind, vocab_size=200, min_frequency=1, add_bert_special_tokens=True
    )
    assert tok.convert_tokens_to_ids(SPECIAL_TOKENS + BERT_SPECIAL_TOKENS) == list(range(7))
    assert (tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (4, 5, 6)
    a = tok("the cat", add_special_tokens=False).input_ids
    b = tok("a dog", add_special_tokens=False).input_ids
    pair = tok("the cat", "a dog")
    assert pair.input_ids == [4, *a, 5, *b, 5]
    assert pair.token_type_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert tok("the cat").input_ids == [4, *a, 5]
    tok.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded("the cat", "a dog").token_type_ids == pair.token_type_ids
    assert reloaded.mask_token == "[MASK]"


# --------------------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------------------

CLEANING_CASES = [
    ({"lowercase": True}, "Hello WORLD", "hello world"),
    ({"strip_html": True}, "<p class='x'>Hi <b>there</b></p> &amp; bye", "Hi there & bye"),
    ({"strip_urls": True}, "see https://example.com/a?b=1, or www.test.org.", "see , or ."),
    ({"strip_emails": True}, "mail john.doe+x@mail.co.uk now", "mail  now"),
    ({"strip_handles": True}, "hi @alice_99, mail a@b.com", "hi , mail a@b.com"),
    ({"expand_contractions": True}, "I'm sure you don't know", "I am sure you do not know"),
    (
        {"expand_contractions": True},
        "Can't, won't, they’re, we'll, I've, she'd",
        "Cannot, will not, they are, we will, I have, she would",
    ),
    ({"expand_contractions": True}, "DON'T", "DO NOT"),
    ({"remove_digits": True}, "room 101, floor ٣", "room , floor "),
    ({"remove_punctuation": True}, "Hello, world! (yes) «ok» $5+1", "Hello world yes ok 51"),
    ({"unicode_normalization": "NFKC"}, "Ｆｕｌｌ ﬁ", "Full fi"),
    ({"unicode_normalization": "NFD"}, "é", "e\u0301"),
    ({"unicode_normalization": "NFC"}, "e\u0301", "é"),
    ({"unicode_normalization": "NFKD"}, "ﬁé", "fie\u0301"),
]


@pytest.mark.parametrize(("options", "text", "expected"), CLEANING_CASES)
def test_each_cleaning_step(options, text, expected):
    config = CleaningConfig(**options)
    assert clean_text(text, config) == expected
    assert build_normalizer(config).normalize_str(text) == expected


def test_default_cleaning_changes_nothing():
    config = CleaningConfig()
    assert config.is_noop and build_normalizer(config) is None
    assert clean_text(CORPUS, config) == CORPUS


AGREEMENT_SAMPLES = [
    "Don't panic! I'M HERE, can't you see? They’re we'd I'd've isn't",
    "<div>Hello <b>world</b></div> &amp;lt; &nbsp;ok <!-- note -->",
    "Visit https://x.org/a?b=1, www.test.org. Mail: j.d+x@mail.co.uk! @alice says hi @bob.",
    "Ｆｕｌｌ ﬁ café ΟΔΟΣ İstanbul 123 ٣٤ ² ½ «fr» ¿qué? $5 + 3 = 8 ^_^ a|b ~x €",
    CORPUS,
]


def test_clean_text_agrees_with_saved_tokenizer_normalizer(corpus_file, tmp_path):
    config = CleaningConfig(
        **{
            name: True
            for name in (
                "lowercase",
                "strip_html",
                "strip_urls",
                "strip_emails",
                "strip_handles",
                "expand_contractions",
                "remove_digits",
                "remove_punctuation",
            )
        },
        unicode_normalization="NFKC",
    )
    train_tokenizer([corpus_file], kind="word", vocab_size=100, cleaning=config).save_pretrained(tmp_path)
    normalizer = AutoTokenizer.from_pretrained(tmp_path).backend_tokenizer.normalizer
    for text in AGREEMENT_SAMPLES:
        assert clean_text(text, config) == normalizer.normalize_str(text)
    for field in ("strip_html", "expand_contractions", "remove_punctuation", "lowercase"):
        single = CleaningConfig(**{field: True})
        for text in AGREEMENT_SAMPLES:
            assert clean_text(text, single) == build_normalizer(single).normalize_str(text)


def test_cleaning_is_applied_at_encode_time(corpus_file):
    config = CleaningConfig(lowercase=True, strip_urls=True)
    tok = train_tokenizer([corpus_file], kind="word", vocab_size=100, min_frequency=1, cleaning=config)
    assert "first" in tok.get_vocab() and "First" not in tok.get_vocab()
    assert tok("THE CAT https://x.org").input_ids == tok("the cat").input_ids


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"unicode_normalization": "XYZ"}, r"unicode_normalization='XYZ'.*'NFC', 'NFD', 'NFKC', 'NFKD'"),
        ({"unicode_normalization": "nfkc"}, r"unicode_normalization='nfkc'"),
        ({"lowercase": "yes"}, r"lowercase='yes' must be a bool"),
    ],
)
def test_bad_cleaning_values_raise(options, match):
    with pytest.raises(ValueError, match=match):
        CleaningConfig(**options)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_missing_file_raises_file_not_found(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_tokenizer([missing], kind="word")


@pytest.mark.parametrize(
    ("content", "match"), [("", r"corpus.txt' is empty \(0 bytes\)"), ("   \n\n\t \n", r"corpus.txt' is empty: .*whitespace")]
)
def test_empty_or_blank_file_raises_naming_the_file(tmp_path, content, match):
    good = write(tmp_path, "the cat sat\n", name="good.txt")
    with pytest.raises(ValueError, match=match):
        train_tokenizer([good, write(tmp_path, content)], kind="char")


def test_blank_dataset_raises():
    datasets = pytest.importorskip("datasets")
    with pytest.raises(ValueError, match="corpus is empty"):
        train_tokenizer(dataset=datasets.Dataset.from_dict({"text": [" ", "\n"]}), kind="char")


def test_no_input_raises():
    with pytest.raises(ValueError, match="No training text"):
        train_tokenizer(kind="word")


def test_corpus_emptied_by_cleaning_raises(tmp_path):
    with pytest.raises(ValueError, match="empty after cleaning"):
        train_tokenizer(
            [write(tmp_path, "123 456\n")], kind="word", cleaning=CleaningConfig(remove_digits=True)
        )


@pytest.mark.parametrize(
    ("kind", "vocab_size", "bert", "match"),
    [
        ("word", 4, False, r"vocab_size=4 .*minimum is 5"),
        ("char", 7, True, r"vocab_size=7 .*minimum is 8"),
        ("bpe", 100, False, r"vocab_size=100 .*minimum is 260"),
        ("unigram", 8, False, r"vocab_size=8 is too small for kind='unigram'"),
    ],
)
def test_too_small_vocab_size_raises(corpus_file, kind, vocab_size, bert, match):
    with pytest.raises(ValueError, match=match):
        train_tokenizer([corpus_file], kind=kind, vocab_size=vocab_size, add_bert_special_tokens=bert)


def test_unknown_kind_raises(corpus_file):
    with pytest.raises(ValueError, match=r"kind='sentencepiece'.*word, char, bpe, wordpiece, unigram"):
        train_tokenizer([corpus_file], kind="sentencepiece")


def test_bad_min_frequency_raises(corpus_file):
    with pytest.raises(ValueError, match="min_frequency=0"):
        train_tokenizer([corpus_file], kind="word", min_frequency=0)


# --------------------------------------------------------------------------------------------------
# Command line and fresh-process loading
# --------------------------------------------------------------------------------------------------


def test_cli_trains_and_saves(corpus_file, tmp_path, capsys):
    out = tmp_path / "tok"
    main(
        [
            "--train_file",
            str(corpus_file),
            "--tokenizer_kind",
            "wordpiece",
            "--vocab_size",
            "150",
            "--min_frequency",
            "1",
            "--lowercase",
            "--unicode_normalization",
            "NFKC",
            "--bert_special_tokens",
            "--output_dir",
            str(out),
        ]
    )
    summary = capsys.readouterr().out.strip()
    assert summary.startswith("Saved a wordpiece tokenizer") and str(out) in summary
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.cls_token_id == 4 and "token_type_ids" in tok("first", "citizen")
    assert tok("FIRST").input_ids == tok("first").input_ids


def test_cli_has_one_flag_per_cleaning_step():
    args = build_parser().parse_args(
        [
            "--train_file",
            "a.txt",
            "b.txt",
            "--train_file",
            "c.txt",
            "--strip_html",
            "--expand_contractions",
            "--output_dir",
            "o",
        ]
    )
    assert args.train_file == ["a.txt", "b.txt", "c.txt"]
    assert args.strip_html and args.expand_contractions and not args.lowercase and not args.remove_digits


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "--train_file and/or --dataset_name"), (["--train_file", "missing.txt"], "missing.txt")],
)
def test_cli_reports_user_errors(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--output_dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_thin_script_runs_the_cli(corpus_file, tmp_path, monkeypatch):
    out = tmp_path / "script-tok"
    argv = [
        "train_tokenizer.py",
        "--train_file",
        str(corpus_file),
        "--tokenizer_kind",
        "char",
        "--min_frequency",
        "1",
        "--output_dir",
        str(out),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(REPO_ROOT / "tokenizer_scripts" / "train_tokenizer.py"), run_name="__main__")
    tok = AutoTokenizer.from_pretrained(out)
    text = "First Citizen:\nSpeak, speak."
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text


def test_loads_in_a_fresh_python_process(trained, tmp_path):
    tok = trained["char"]
    tok.save_pretrained(tmp_path)
    code = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "texts = json.loads(sys.argv[2])\n"
        "print(json.dumps([tok(t).input_ids for t in texts] + [[tok.pad_token_id, tok.unk_token_id]]))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), json.dumps(SAMPLES)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    expected = [tok(t).input_ids for t in SAMPLES] + [[0, 1]]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


# --------------------------------------------------------------------------------------------------
# Input guards: long lines, binary and non-UTF-8 files, the byte budget
# --------------------------------------------------------------------------------------------------

LONG_LINE_CHARS = 8_000_000


@pytest.fixture(scope="module")
def long_line_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus whose second line is one 8 MB line of words (the line that used to crash or hang trainers)."""
    words = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
    line = " ".join(words[i * 7 % len(words)] for i in range(LONG_LINE_CHARS // 5))[:LONG_LINE_CHARS]
    path = tmp_path_factory.mktemp("long") / "long.txt"
    path.write_text(f"the cat sat\n{line}\nthe end\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_an_8mb_line_is_refused_at_once_naming_file_line_length_and_limit(long_line_file, kind):
    start = time.perf_counter()
    with pytest.raises(ValueError) as error:
        train_tokenizer([long_line_file], kind=kind, vocab_size=VOCAB_SIZE[kind], min_frequency=1)
    assert time.perf_counter() - start < 10
    message = str(error.value)
    assert "long.txt" in message and "line 2" in message
    assert f"{LONG_LINE_CHARS:,} characters" in message and "max_line_length=100,000" in message
    assert "long_lines='split'" in message


@pytest.mark.parametrize("kind", ["word", "bpe", "wordpiece", "unigram"])
def test_an_8mb_line_is_split_into_pieces_on_request(long_line_file, kind):
    start = time.perf_counter()
    tok = train_tokenizer(
        [long_line_file], kind=kind, vocab_size=VOCAB_SIZE[kind], min_frequency=1, long_lines="split"
    )
    assert time.perf_counter() - start < 60
    ids = tok("gamma delta", add_special_tokens=False).input_ids
    assert tok.unk_token_id not in ids and tok.decode(ids).replace(" ", "") == "gammadelta"


def test_split_pieces_cut_after_whitespace_and_keep_every_character(tmp_path):
    from hf_seqmodels.tokenization.corpus import CorpusLimits, read_corpus

    text = "aaaa bbbb cccc dddd\nshort\n" + "x" * 23 + "\n"
    pieces = list(read_corpus([write(tmp_path, text)], None, CorpusLimits(max_line_length=10, long_lines="split")))
    assert "".join(pieces) == text
    assert pieces[:3] == ["aaaa bbbb ", "cccc dddd\n", "short\n"]
    assert pieces[3:] == ["x" * 10, "x" * 10, "xxx\n"]  # no whitespace: cut at the limit
    assert all(len(piece.rstrip("\n")) <= 10 for piece in pieces)


def test_long_dataset_rows_are_refused_or_split():
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"text": ["the cat", "word " * 30]})
    with pytest.raises(ValueError, match=r"dataset column 'text', row 2: 150 characters.*max_line_length=100"):
        train_tokenizer(dataset=data, kind="word", min_frequency=1, max_line_length=100)
    tok = train_tokenizer(dataset=data, kind="word", min_frequency=1, max_line_length=100, long_lines="split")
    assert "word" in tok.get_vocab()


def test_a_dataset_row_holding_a_document_is_checked_line_by_line():
    """A row of many short lines (a whole document, as the demo passes its corpus) is no long line; one long
    line inside it is refused, naming the row and the line."""
    datasets = pytest.importorskip("datasets")
    document = "the cat sat\n" * 40  # 480 characters in 12-character lines
    tok = train_tokenizer(dataset=datasets.Dataset.from_dict({"text": [document]}), kind="char", min_frequency=1,
                          max_line_length=100)
    assert set(tok.get_vocab()) == {"<pad>", "<unk>", "<bos>", "<eos>", *"the cat sat\n"}  # newlines kept
    long_inside = datasets.Dataset.from_dict({"text": ["short\n" + "x" * 150 + "\nshort\n"]})
    with pytest.raises(ValueError, match=r"dataset column 'text', row 1, line 2: 151 characters.*max_line_length=100"):
        train_tokenizer(dataset=long_inside, kind="word", min_frequency=1, max_line_length=100)


def test_binary_file_is_refused_with_the_byte_offset(tmp_path):
    path = tmp_path / "image.bin"
    path.write_bytes(b"GIF89a header\n" + b"\x00\x01\x02" * 50)
    with pytest.raises(ValueError, match=r"image.bin' looks binary: .*NUL byte at byte offset 14"):
        train_tokenizer([path], kind="bpe")


def test_non_utf8_file_is_refused_with_the_byte_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\u00e9 au lait\n".encode("utf-8") * 3 + "na\u00efve\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt' is not UTF-8 text: invalid byte 0xef at byte offset 44"):  # 3 × 14 + 2
        train_tokenizer([path], kind="word")


def test_invalid_byte_offset_is_exact_across_scan_blocks(tmp_path, monkeypatch):
    from hf_seqmodels.tokenization import corpus

    monkeypatch.setattr(corpus, "_SCAN_BLOCK", 4)  # the 3-byte '€' straddles two blocks
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ab\xe2\x82\xac" + b"\xe2\x82\xff")  # a valid euro sign, then a broken one at 5
    assert corpus._first_invalid_utf8(path) == (5, b"\xe2")


def test_max_train_bytes_reads_only_a_prefix(tmp_path):
    path = write(tmp_path, "alpha beta\n" * 10 + "omega\n" * 10)
    capped = train_tokenizer([path], kind="word", min_frequency=1, max_train_bytes=110)
    assert "alpha" in capped.get_vocab() and "omega" not in capped.get_vocab()
    assert "omega" in train_tokenizer([path], kind="word", min_frequency=1).get_vocab()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_train_bytes": 0}, "max_train_bytes=0"),
        ({"max_line_length": 0}, "max_line_length=0"),
        ({"long_lines": "truncate"}, r"long_lines='truncate'.*'error', 'split'"),
    ],
)
def test_bad_limits_raise(corpus_file, options, match):
    with pytest.raises(ValueError, match=match):
        train_tokenizer([corpus_file], kind="word", **options)


@pytest.fixture
def bad_files(long_line_file, tmp_path) -> dict[str, Path]:
    paths = {"long": long_line_file, "binary": tmp_path / "b.bin", "empty": tmp_path / "e.txt",
             "latin1": tmp_path / "l.txt"}
    paths["binary"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    paths["empty"].write_bytes(b"")
    paths["latin1"].write_bytes("na\u00efve\n".encode("latin-1"))
    return paths


@pytest.mark.parametrize("case", ["long", "binary", "empty", "latin1"])
def test_cli_prints_one_error_line_and_exits_2_for_bad_files(case, bad_files, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--train_file", str(bad_files[case]), "--tokenizer_kind", "unigram", "--output_dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and bad_files[case].name in lines[0]
    assert not (tmp_path / "out").exists()


def test_script_reports_a_long_line_without_a_traceback(bad_files, tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tokenizer_scripts" / "train_tokenizer.py"), "--train_file",
         str(bad_files["long"]), "--tokenizer_kind", "bpe", "--output_dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "line 2: 8,000,000 characters" in errors[0]
