"""The training scripts train a tokenizer on the user's files themselves, on the main process only: under
``accelerate launch`` the other process reads no text and loads the saved tokenizer; a bad file is named."""

from __future__ import annotations

import pytest

from hf_seqmodels.training.lm.cli import main as lm_main

LM_ARGS = ["--tokenizer_kind", "char", "--min_frequency", "1", "--model_family", "rnn", "--preset", "tiny",
           "--config_overrides", "cell_type=lstm,hidden_size=8", "--max_steps", "1", "--per_device_train_batch_size",
           "2", "--block_size", "8", "--optim", "sgd", "--disable_tqdm", "--no_plot"]
TEXT = "".join(f"line {i}: the cat sat on the mat.\n\n" for i in range(40))


def test_a_bad_training_file_is_named_in_the_error(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait\n".encode("latin-1") * 50)
    with pytest.raises(ValueError, match=rf"{bad.name}.*not UTF-8.*byte offset 3"):
        lm_main(["--train_file", str(bad), "--output_dir", str(tmp_path / "out"), "--cache_dir", str(tmp_path / "c"),
                 *LM_ARGS])
    assert not any((tmp_path / "out").rglob("train.txt")), "no copy of the corpus is written"


CHILD = """
import sys
import os
import hf_seqmodels.training.{task}.cli as cli

from distributed_utils import rank_logger

say = rank_logger()

def spy(name):
    function = getattr(cli, name)
    def wrapper(*args, **kwargs):
        say(f"calls {{name}}")
        return function(*args, **kwargs)
    setattr(cli, name, wrapper)

for name in {spied}:
    spy(name)
cli.main(sys.argv[1:])
"""
BERT_ARGS = ["--preset", "tiny", "--vocab_size", "80", "--min_frequency", "1", "--max_seq_length", "32",
             "--config_overrides", "max_position_embeddings=32", "--validation_split_percentage", "20",
             "--per_device_train_batch_size", "4", "--max_steps", "1", "--optim", "sgd", "--disable_tqdm"]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["lm", "bert"])
def test_two_processes_read_the_text_for_the_tokenizer_once(task, tmp_path):
    from distributed_utils import launch_child_script

    corpus = tmp_path / "train.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    reads = {"lm": ["tokenizer_training_files", "load_dataset_splits"],
             "bert": ["tokenizer_training_texts", "load_documents"]}[task]
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(task=task, spied=reads))
    args = [*(LM_ARGS if task == "lm" else BERT_ARGS), "--train_file", str(corpus), "--output_dir",
            str(tmp_path / "out"), "--cache_dir", str(tmp_path / "cache")]
    calls = sorted(line for line in launch_child_script(script, args, tmp_path, timeout=300) if " calls " in line)
    assert calls == [f"rank 0 calls {reads[0]}"]
    assert (tmp_path / "out" / "tokenizer.json").is_file() and not any((tmp_path / "out").rglob("train.txt"))
