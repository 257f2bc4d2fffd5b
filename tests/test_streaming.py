"""Tests of streamed training text (``hf_seqmodels.training.lm.streaming``) and of ``train_lm --streaming``:
the windows equal the token-file path's where the layouts agree, processes read disjoint examples, and a
resumed run continues exactly where an uninterrupted one would be."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import safetensors.torch
import tokenizer_test_utils
import torch
from tokenizers import Regex, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from hf_seqmodels.training.lm.cli import main, parse_arguments
from hf_seqmodels.training.lm.data import StreamWindows, batchify
from hf_seqmodels.training.lm.streaming import (
    StreamingWindows,
    StreamPosition,
    load_text_stream,
    tokenize_stream,
)
from hf_seqmodels.training.lm.token_streams import lm_token_streams
from hf_seqmodels.training.lm.trainer import stream_position_file

CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789 .\n"


def char_tokenizer() -> PreTrainedTokenizerFast:
    """A character tokenizer (pad 0, unk 1, bos 2, eos 3) without a template."""
    return tokenizer_test_utils.char_tokenizer(CHARACTERS, bos_template=False)


def numbered_lines(count: int, start: int = 0) -> str:
    """Lines of different lengths, each with its number: ``line 0007 the cat sat. x x\\n``."""
    return "".join(f"line {i:04d} the cat sat.{' x' * (i % 7)}\n" for i in range(start, start + count))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path, Path]:
    """``(training file, validation file, saved tokenizer folder)``."""
    train, validation = tmp_path / "train.txt", tmp_path / "valid.txt"
    train.write_text(numbered_lines(120), encoding="utf-8")
    validation.write_text(numbered_lines(12, start=500), encoding="utf-8")
    char_tokenizer().save_pretrained(tmp_path / "tokenizer")
    return train, validation, tmp_path / "tokenizer"


def read(windows: StreamingWindows, indices) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(w.input_ids, w.labels) for w in map(windows.batch, indices)]


# --------------------------------------------------------------------------- the reader


def test_one_row_equals_the_token_file_windows(files, tmp_path):
    """One row, one process: the streamed windows are the token-file path's StreamWindows over the same ids."""
    train, validation, _ = files
    tokenizer = char_tokenizer()
    streams = lm_token_streams(train, tokenizer, validation_file=validation, cache_dir=tmp_path / "cache")
    reference = StreamWindows(batchify(streams.train, 1), 16)
    streamed = StreamingWindows(load_text_stream(str(train)), tokenizer, rows=1, block_size=16, num_windows=20)
    for index in range(20):
        window = streamed.batch(index)
        assert window.input_ids.shape == (1, 16) and window.input_ids.dtype == torch.long
        assert torch.equal(window.input_ids, reference.batch(index).input_ids), index
        assert torch.equal(window.labels, reference.batch(index).labels), index
    validation_ids = tokenize_stream(load_text_stream(str(validation), split="validation"), tokenizer)
    assert validation_ids.tolist() == streams.validation.tolist()


def row_lines(windows: StreamingWindows, count: int, tokenizer) -> list[list[int]]:
    """The numbers of the complete lines each row of ``count`` windows read, in order."""
    batches = [windows.batch(i) for i in range(count)]
    rows = torch.cat([b.input_ids for b in batches], dim=1)  # (rows, count*T): each row's stream
    texts = [tokenizer.decode(row.tolist()) for row in rows]
    every_line = numbered_lines(120).splitlines(keepends=True)
    for text in texts:  # a row is whole examples one after the other, then the start of the next one
        complete, tail = text[: text.rfind("\n") + 1], text[text.rfind("\n") + 1 :]
        assert re.fullmatch(r"(line \d{4} the cat sat\.( x)*\n)*", complete), text
        assert any(line.startswith(tail) for line in every_line), tail
    return [[int(n) for n in re.findall(r"line (\d{4}) the cat sat\.(?: x)*\n", text)] for text in texts]


def test_two_ranks_read_disjoint_examples_and_rows_fill_evenly(files):
    """Rank r of 2 reads every second line from r; its rows hold whole lines in stream order, no line twice."""
    train, _, _ = files
    tokenizer = char_tokenizer()
    seen = {}
    for rank in (0, 1):
        windows = StreamingWindows(load_text_stream(str(train)), tokenizer, rows=3, block_size=20, num_windows=12,
                                   process_index=rank, num_processes=2)
        lines = row_lines(windows, 12, tokenizer)
        assert all(row == sorted(row) and row for row in lines)
        flat = sorted(n for row in lines for n in row)
        assert len(flat) == len(set(flat)) and all(n % 2 == rank for n in flat)
        assert max(len(r) for r in windows.position().rows) <= 20 + max(len(line) for line in numbered_lines(120)
                                                                         .splitlines(keepends=True))
        seen[rank] = set(flat)
    assert not seen[0] & seen[1] and len(seen[0]) > 20 and len(seen[1]) > 20


def test_restored_position_and_replay_continue_exactly(files):
    """After k windows (across the end of the first pass), a reader restored from the position, and a fresh reader
    asked for window k, read the windows an uninterrupted reader reads."""
    train, _, _ = files
    tokenizer = char_tokenizer()

    def reader():
        return StreamingWindows(load_text_stream(str(train)), tokenizer, rows=2, block_size=32, num_windows=100,
                                process_index=1, num_processes=2, examples_per_call=5)

    uninterrupted = reader()
    expected = read(uninterrupted, range(60))
    assert uninterrupted.position().pass_index >= 1, "the test must cross into a second pass"
    for k in (7, 35):  # 35: in the second pass
        first = reader()
        read(first, range(k))
        saved = json.loads(json.dumps(first.position().to_dict()))
        restored = reader()
        restored.restore(saved)
        for (inputs, labels), (want_inputs, want_labels) in zip(read(restored, range(k, 60)), expected[k:],
                                                               strict=True):
            assert torch.equal(inputs, want_inputs) and torch.equal(labels, want_labels)
        replayed = reader()
        assert torch.equal(replayed.batch(k).input_ids, expected[k][0])
    with pytest.raises(ValueError, match="3 rows"):
        reader().restore(StreamPosition(rows=[[], [], []]))


def test_reader_errors_name_the_argument(files, tmp_path):
    train, _, _ = files
    stream = load_text_stream(str(train))
    with pytest.raises(ValueError, match=r"`block_size`=0: expected an integer >= 1"):
        StreamingWindows(stream, char_tokenizer(), rows=1, block_size=0, num_windows=3)
    with pytest.raises(ValueError, match="`text_column`='content'.*'text'"):
        StreamingWindows(stream, char_tokenizer(), rows=1, block_size=4, num_windows=3, text_column="content").batch(0)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="no tokens"):
        StreamingWindows(load_text_stream(str(empty)), char_tokenizer(), rows=1, block_size=4, num_windows=3).batch(0)
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("x\n" * 5)
    nothing = char_tokenizer()
    nothing.backend_tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="removed")
    with pytest.raises(ValueError, match="no tokens"):  # a stream of examples without a token does not loop forever
        StreamingWindows(load_text_stream(str(unknown)), nothing, rows=1, block_size=4, num_windows=3).batch(0)


# --------------------------------------------------------------------------- train_lm --streaming


def command(files, output_dir: Path, *extra: str) -> list[str]:
    train, validation, tokenizer = files
    return ["--train_file", str(train), "--validation_file", str(validation), "--tokenizer_name", str(tokenizer),
            "--model_family", "rnn", "--preset", "tiny", "--config_overrides", "cell_type=lstm,hidden_size=16",
            "--output_dir", str(output_dir), "--per_device_train_batch_size", "1", "--block_size", "16",
            "--learning_rate", "0.02", "--optim", "adamw_torch", "--logging_steps", "1", "--disable_tqdm",
            "--no_plot", "--cache_dir", str(output_dir.parent / "cache"), *extra]


def losses(output_dir: Path) -> list[float]:
    history = json.loads((output_dir / "training_history.json").read_text())
    return [record["train_loss"] for record in history if "train_loss" in record]


def final_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(output_dir / "model.safetensors"))


def test_streamed_training_matches_the_token_files_with_one_row(files, tmp_path):
    """One row: the streamed run reads the token-file run's windows, so losses, weights and eval loss agree."""
    token_files = main(command(files, tmp_path / "files", "--max_steps", "6"))
    streamed = main(command(files, tmp_path / "stream", "--max_steps", "6", "--streaming"))
    assert losses(tmp_path / "stream") == losses(tmp_path / "files") and len(losses(tmp_path / "files")) == 6
    assert streamed["eval_loss"] == token_files["eval_loss"]
    for name, value in final_weights(tmp_path / "files").items():
        assert torch.equal(value, final_weights(tmp_path / "stream")[name]), name
    card = (tmp_path / "stream" / "README.md").read_text()
    assert "streamed" in card


@pytest.mark.parametrize("position_saved", [True, False])
def test_streamed_run_resumes_exactly(position_saved, files, tmp_path):
    """A streamed run cut after 4 updates (its checkpoint-4 alone) and resumed ends as the uninterrupted run:
    the same loss curve and weights, from the saved stream position or, without it, by reading up to it."""
    extra = ("--max_steps", "9", "--streaming", "--per_device_train_batch_size", "3", "--save_steps", "4")
    main(command(files, tmp_path / "full", *extra))
    checkpoint = tmp_path / "full" / "checkpoint-4"
    assert json.loads(stream_position_file(checkpoint, 0).read_text())["windows"] == 4
    assert "stream-rank-0.json" in json.loads((checkpoint / "manifest.json").read_text())["files"]
    if not position_saved:  # a checkpoint written before the positions were in its manifest
        stream_position_file(checkpoint, 0).unlink()
        manifest = json.loads((checkpoint / "manifest.json").read_text())
        del manifest["files"]["stream-rank-0.json"]
        (checkpoint / "manifest.json").write_text(json.dumps(manifest))
    resumed = main(command(files, tmp_path / "resumed", *extra, "--resume_from_checkpoint", str(checkpoint)))
    assert resumed["steps"] == 9
    assert losses(tmp_path / "resumed") == losses(tmp_path / "full")
    for name, value in final_weights(tmp_path / "full").items():
        assert torch.equal(value, final_weights(tmp_path / "resumed")[name]), name


def test_dataset_name_streams_its_train_split_and_validates_on_its_validation_split(files, tmp_path):
    """--dataset_name takes the Hub code path (here a local dataset folder, offline): train split streamed,
    the validation split's first --max_eval_samples examples tokenised; a dataset without one is refused."""
    train, validation, tokenizer = files
    folder = tmp_path / "dataset"
    folder.mkdir()
    (folder / "train.txt").write_text(train.read_text())
    (folder / "validation.txt").write_text(validation.read_text())
    argv = ["--dataset_name", str(folder), "--tokenizer_name", str(tokenizer), "--streaming", "--max_steps", "2",
            "--model_family", "rnn", "--preset", "tiny", "--per_device_train_batch_size", "2", "--block_size", "8",
            "--disable_tqdm", "--no_plot", "--max_eval_samples", "3", "--per_device_eval_batch_size", "1"]
    results = main([*argv, "--output_dir", str(tmp_path / "run")])
    lines = validation.read_text().splitlines()[:3]  # the text builder of a dataset folder drops line breaks
    assert results["steps"] == 2 and results["eval_tokens"] == sum(len(line) for line in lines) - 1
    (folder / "validation.txt").unlink()
    with pytest.raises(ValueError, match=r"`dataset_name`=.*a dataset with a validation split for --streaming"):
        main([*argv, "--output_dir", str(tmp_path / "run2")])


@pytest.mark.parametrize(("extra", "drop", "message"), [
    ((), None, r"`max_steps`=-1: expected a number of updates >= 1 with --streaming"),
    (("--max_steps", "3"), "--tokenizer_name", "--streaming needs a saved tokenizer"),
    (("--max_steps", "3"), "--validation_file", r"`validation_file`=None: expected a \.txt file"),
    (("--max_steps", "3", "--shuffle_windows"), None, r"`shuffle_windows`=True: expected False with --streaming"),
    (("--max_steps", "3", "--preprocessing_num_workers", "2"), None, r"`preprocessing_num_workers`=2"),
])
def test_streaming_refuses_what_a_stream_cannot_do(extra, drop, message, files, tmp_path):
    argv = command(files, tmp_path / "run", "--streaming", *extra)
    if drop is not None:
        del argv[argv.index(drop) : argv.index(drop) + 2]
    with pytest.raises(ValueError, match=message):
        parse_arguments(argv)
    with pytest.raises(ValueError, match=r"`max_eval_samples`=5: expected no value without --streaming"):
        parse_arguments(command(files, tmp_path / "run", "--max_eval_samples", "5"))


@pytest.mark.slow
def test_two_processes_stream_and_resume_exactly(files, tmp_path):
    """``accelerate launch`` on 2 CPU processes: each keeps its stream position beside checkpoint-3, and a run
    resumed from that checkpoint alone ends with the uninterrupted run's loss curve and weights."""
    from distributed_utils import launch_two_cpu_processes

    extra = ("--max_steps", "6", "--streaming", "--per_device_train_batch_size", "2", "--save_steps", "3")
    launch_two_cpu_processes("train_lm.py", command(files, tmp_path / "full", *extra))
    checkpoint = tmp_path / "full" / "checkpoint-3"
    positions = [json.loads(stream_position_file(checkpoint, rank).read_text()) for rank in (0, 1)]
    assert [p["windows"] for p in positions] == [3, 3] and positions[0]["rows"] != positions[1]["rows"]
    launch_two_cpu_processes("train_lm.py", command(files, tmp_path / "resumed", *extra, "--resume_from_checkpoint",
                                                    str(checkpoint)))
    assert losses(tmp_path / "resumed") == losses(tmp_path / "full")
    for name, value in final_weights(tmp_path / "full").items():
        assert torch.equal(value, final_weights(tmp_path / "resumed")[name]), name
