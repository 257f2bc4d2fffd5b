"""Our tokenizers as transformers clients use them: the add_bos_token/add_eos_token switches of Llama-style
tokenizers, seq2seq labels from ``text_target`` for ``DataCollatorForSeq2Seq``, and reloading in a process
without the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer, DataCollatorForSeq2Seq

from hf_seqmodels.tokenization import (
    restore_special_token_switches,
    special_token_switches,
    train_tokenizer,
    with_special_token_switches,
)

BOS, EOS = 2, 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clients") / "corpus.txt"
    path.write_text("the cat sat on the mat\na dog and a cat\n" * 3, encoding="utf-8")
    return path


def train(corpus: Path, **switches):
    return train_tokenizer([corpus], kind="word", vocab_size=50, min_frequency=1, **switches)


@pytest.mark.parametrize(
    ("switches", "template"),
    [({}, "{bos} {A}"), ({"add_bos_token": False, "add_eos_token": True}, "{A} {eos}"),
     ({"add_bos_token": False}, "{A}"), ({"add_eos_token": True}, "{bos} {A} {eos}")],
)
def test_switches_decide_the_template_and_report_it(corpus, switches, template):
    tok = train(corpus, **switches)
    words = tok("the cat", add_special_tokens=False).input_ids
    expected = [BOS] * template.startswith("{bos}") + words + [EOS] * template.endswith("{eos}")
    assert tok("the cat").input_ids == expected
    assert (tok.add_bos_token, tok.add_eos_token) == special_token_switches(tok)
    assert (tok.add_bos_token, tok.add_eos_token) == ("{bos}" in template, "{eos}" in template)


def test_toggling_a_switch_rebuilds_the_template_as_on_llama(corpus):
    tok = train(corpus)
    words = tok("the cat", add_special_tokens=False).input_ids
    tok.add_bos_token = False
    assert tok("the cat").input_ids == words
    tok.add_eos_token = True
    assert tok("the cat").input_ids == [*words, EOS]


def test_bert_template_has_no_switches(corpus):
    with pytest.raises(ValueError, match="add_bos_token/add_eos_token cannot be combined with add_bert_special"):
        train_tokenizer([corpus], kind="word", add_bert_special_tokens=True, add_bos_token=False)
    with pytest.raises(ValueError, match="add_eos_token='yes' must be None, True or False"):
        train(corpus, add_eos_token="yes")


def test_reloaded_tokenizer_keeps_the_template_and_switches_are_restored(corpus, tmp_path):
    train(corpus, add_bos_token=False, add_eos_token=True).save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    words = reloaded("the cat", add_special_tokens=False).input_ids
    assert reloaded("the cat").input_ids == [*words, EOS]  # what it encodes survives any reload
    assert special_token_switches(reloaded) == (False, True)
    restore_special_token_switches(reloaded)
    assert (reloaded.add_bos_token, reloaded.add_eos_token) == (False, True)
    reloaded.add_bos_token = True  # toggling one switch keeps the other
    assert reloaded("the cat").input_ids == [BOS, *words, EOS]
    # lm-evaluation-harness passes its add_bos_token model argument to from_pretrained
    explicit = AutoTokenizer.from_pretrained(tmp_path, add_bos_token=True, add_eos_token=False)
    assert explicit("the cat").input_ids == [BOS, *words]


def test_with_special_token_switches_never_changes_the_tokenizer_given(corpus):
    tok = train(corpus)
    seq2seq = with_special_token_switches(tok, add_bos_token=False, add_eos_token=True)
    assert seq2seq is not tok and tok("the").input_ids[0] == BOS and seq2seq("the").input_ids[-1] == EOS
    assert with_special_token_switches(seq2seq, False, True) is seq2seq


def test_text_target_labels_end_with_eos_and_collate_for_seq2seq(corpus):
    """transformers' translation recipe: tokenizer(inputs, text_target=targets) + DataCollatorForSeq2Seq."""
    tok = train(corpus, add_bos_token=False, add_eos_token=True)
    features = [tok("the cat", text_target="a dog"), tok("a dog sat", text_target="the cat sat on the mat")]
    assert all(f["labels"][-1] == EOS and f["input_ids"][-1] == EOS for f in features)
    assert BOS not in features[0]["labels"]
    batch = DataCollatorForSeq2Seq(tok, label_pad_token_id=-100)(features)
    assert batch["labels"].shape == (2, 7)
    assert batch["labels"][0].tolist() == [*features[0]["labels"], -100, -100, -100, -100]
    assert batch["input_ids"][0].tolist() == [*features[0]["input_ids"], 0]


def test_saved_seq2seq_tokenizer_gives_labels_with_eos_without_the_package(corpus, tmp_path):
    tok = train(corpus, add_bos_token=False, add_eos_token=True)
    tok.save_pretrained(tmp_path)
    code = (
        "import json, sys\n"
        "sys.modules['hf_seqmodels'] = None  # the package cannot be imported\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "print(json.dumps([tok('the cat', text_target='a dog sat')['labels'], tok('a dog')['input_ids']]))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120, check=True)
    labels, source = json.loads(result.stdout.strip().splitlines()[-1])
    assert labels == tok(text_target="a dog sat").input_ids and labels[-1] == EOS
    assert source == tok("a dog").input_ids and source[-1] == EOS
