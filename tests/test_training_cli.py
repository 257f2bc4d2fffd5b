"""The training command lines as a user meets them: transformers' TrainingArguments names in every script, the
preset's recipe under explicit flags, one-line errors, the output-folder rule, the results files, resuming with
changed arguments, the time cap's message and argument files."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate.state import AcceleratorState

from hf_seqmodels.training.bert.cli import parse_arguments as bert_arguments
from hf_seqmodels.training.core import precision
from hf_seqmodels.training.core.cli import launched_processes
from hf_seqmodels.training.finetune.cli import parse_arguments as finetune_arguments
from hf_seqmodels.training.lm.cli import main as lm_main
from hf_seqmodels.training.lm.cli import parse_arguments as lm_arguments
from hf_seqmodels.training.seq2seq.cli import parse_arguments as seq2seq_arguments

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = ["train_lm.py", "train_seq2seq.py", "pretrain_bert.py", "finetune.py"]
#: the TrainingArguments names every training script takes
TRAINING_ARGUMENTS = (
    "--output_dir --do_train --do_eval --do_predict --per_device_train_batch_size --per_device_eval_batch_size "
    "--gradient_accumulation_steps --learning_rate --weight_decay --adam_beta1 --adam_beta2 --adam_epsilon "
    "--max_grad_norm --num_train_epochs --max_steps --lr_scheduler_type --warmup_steps --optim --logging_steps "
    "--eval_strategy --eval_steps --save_strategy --save_steps --save_total_limit --seed --bf16 --fp16 "
    "--resume_from_checkpoint --report_to --dataloader_num_workers --torch_compile --gradient_checkpointing "
    "--disable_tqdm").split()
#: the names the scripts used before, each a duplicate of a TrainingArguments field
OLD_NAMES = ["--optimizer", "--lr_scheduler ", "--checkpointing_steps", "--mixed_precision", "--max_train_minutes",
             "--eval_batch_size", "--tokenizer_name_or_path", "--eval_num_beams", "--bptt"]
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 30


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("HF_SEQMODELS_DEBUG", None)
    return subprocess.run([sys.executable, str(REPO / "training" / script), *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_takes_the_training_arguments_names_and_none_of_the_old_ones(script):
    shown = run_script(script, "--help")
    assert shown.returncode == 0, shown.stderr
    missing = [name for name in TRAINING_ARGUMENTS if f"{name} " not in shown.stdout and f"{name}," not in shown.stdout]
    assert not missing, f"{script} lacks {missing}"
    assert not [name for name in OLD_NAMES if name in shown.stdout]


@pytest.fixture
def in_a_folder_with_stand_in_data(tmp_path, monkeypatch):
    """The commands below name `--train_file t.txt` / `t.tsv`, which the parsers check exist."""
    for name in ("t.txt", "t.tsv"):
        (tmp_path / name).write_text("a b\tc d\n")
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("in_a_folder_with_stand_in_data")
def test_the_scripts_parse_the_same_flags_into_their_arguments(tmp_path):
    common = ["--output_dir", str(tmp_path), "--optim", "sgd", "--learning_rate", "0.5", "--lr_scheduler_type",
              "cosine", "--lr_scheduler_kwargs", '{"min_lr_ratio": 0.1}', "--bf16", "--save_strategy", "epoch",
              "--warmup_steps", "0.1", "--max_grad_norm", "0", "--seed", "7"]
    parsed = [lm_arguments([*common, "--train_file", "t.txt", "--preset", "tiny", "--block_size", "9"])[2],
              seq2seq_arguments([*common, "--train_file", "t.tsv", "--preset", "tiny", "--num_beams", "3"])[2],
              bert_arguments([*common, "--train_file", "t.txt", "--preset", "tiny"])[2]]
    for args in parsed:
        assert (args.optim, args.learning_rate, args.lr_scheduler_type, args.mixed_precision, args.seed) == (
            "sgd", 0.5, "cosine", "bf16", 7)
        assert args.scheduler_kwargs == {"min_lr_ratio": 0.1} and args.clip_norm is None
        assert args.steps("warmup_steps", 200) == 20  # a fraction of the updates, as in transformers
        assert args.do_train and args.do_eval  # neither given: train and evaluate
    assert parsed[0].block_size == 9 and parsed[1].num_beams == 3
    finetune = finetune_arguments([*common, "--train_file", "t.tsv", "--preset", "tiny", "--tokenizer_name", "tok"])[2]
    assert (finetune.optim, finetune.learning_rate, finetune.lr_scheduler_type) == ("sgd", 0.5, "cosine")


@pytest.mark.usefixtures("in_a_folder_with_stand_in_data")
def test_the_preset_recipe_fills_what_the_command_line_leaves_out(tmp_path):
    base = ["--output_dir", str(tmp_path), "--train_file", "t.txt", "--model_family", "rnn"]
    recipe = lm_arguments([*base, "--preset", "zaremba-small"])[2]
    assert (recipe.optim, recipe.lr_scheduler_type, recipe.per_device_train_batch_size) == ("sgd", "zaremba", 20)
    assert recipe.scheduler_kwargs["decay_factor"] == 0.5 and recipe.learning_rate > 1.0
    given = lm_arguments([*base, "--preset", "zaremba-small", "--learning_rate", "3", "--block_size", "50"])[2]
    assert (given.learning_rate, given.block_size, given.optim) == (3.0, 50, "sgd")  # explicit flags win
    switched = lm_arguments([*base, "--preset", "zaremba-small", "--optim", "adamw_torch"])[2]
    assert switched.learning_rate == 1e-3, "SGD's learning rate must not reach AdamW"
    assert switched.lr_scheduler_type == "linear" and switched.scheduler_kwargs == {}
    nano = lm_arguments([*base, "--model_family", "transformer_lm", "--preset", "nanogpt-cpu"])[2]
    bare = base[:-2]  # no --model_family
    alone = lm_arguments([*bare, "--preset", "nanogpt-cpu"])  # a preset only one family has names the family
    assert alone[0].model_family == "transformer_lm" and alone[2].max_steps == 2000
    assert lm_arguments([*bare, "--preset", "tiny"])[0].model_family == "rnn"  # every family has "tiny": the default
    assert (nano.max_steps, nano.optim, nano.block_size) == (2000, "adamw_torch_fused", 64)  # the whole command
    assert nano.shuffle_windows is False  # the task default
    gpu = lm_arguments([*base, "--model_family", "transformer_lm", "--preset", "nanogpt-shakespeare-char"])[2]
    assert (gpu.max_steps, gpu.block_size, gpu.per_device_train_batch_size, gpu.shuffle_windows) == (5000, 256, 64, True)
    assert lm_arguments([*base, "--model_family", "transformer_lm", "--preset", "nanogpt-shakespeare-char",
                         "--shuffle_windows", "False"])[2].shuffle_windows is False  # the command line wins
    assert lm_arguments([*base, "--preset", "zaremba-small", "--max_steps", "5"])[2].max_steps == 5
    rescheduled = lm_arguments([*base, "--preset", "zaremba-small", "--lr_scheduler_type", "cosine"])[2]
    assert rescheduled.optim == "sgd" and rescheduled.scheduler_kwargs == {}, "zaremba's options must not reach cosine"


@pytest.fixture
def fresh_accelerator_state():
    """accelerate keeps one mixed precision per process: leave no bf16 state behind for the next test."""
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.usefixtures("in_a_folder_with_stand_in_data")
def test_a_recipe_turns_bf16_on_and_the_command_line_turns_it_off(tmp_path, fresh_accelerator_state, monkeypatch):
    monkeypatch.setattr(precision, "bf16_is_fast", lambda device: (True, "faked"))  # a device with bf16 units
    base = ["--output_dir", str(tmp_path), "--train_file", "t.txt", "--model_family", "transformer_lm"]
    assert lm_arguments([*base, "--preset", "nanogpt-cpu"])[2].mixed_precision == "bf16"  # the recipe's
    assert lm_arguments([*base, "--preset", "nanogpt-cpu", "--bf16", "False"])[2].bf16 is False  # the user's
    assert lm_arguments([*base, "--preset", "tiny"])[2].bf16 is False
    assert lm_arguments([*base, "--preset", "tiny", "--bf16"])[2].bf16 is True  # a bare flag means True
    assert lm_arguments([*base, "--model_family", "rnn", "--preset", "zaremba-small"])[2].bf16 is False
    seq2seq = seq2seq_arguments(["--output_dir", str(tmp_path), "--train_file", "t.tsv", "--model_family",
                                 "transformer", "--preset", "transformer-base"])[2]
    bert = bert_arguments(["--output_dir", str(tmp_path), "--train_file", "t.txt", "--preset", "bert-mini"])[2]
    assert seq2seq.bf16 is True and bert.bf16 is True
    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    for flags, expected in (((), True), (("--bf16", "False"), False)):
        AcceleratorState._reset_state(reset_partial_state=True)  # one mixed precision per process and state
        out = tmp_path / f"run-{expected}"
        lm_main(lm_flags(train, out, "--model_family", "transformer_lm", "--preset", "nanogpt-cpu",
                         "--config_overrides", "d_model=16,decoder_ffn_dim=32,decoder_layers=1", "--max_steps", "2",
                         "--warmup_steps", "0", *flags))
        assert json.loads((out / "training_args.json").read_text())["bf16"] is expected


def test_a_user_mistake_is_one_line_with_exit_status_two(tmp_path, capsys):
    """One real process for the exit status and a stderr of one line, import warnings included; the other mistakes
    go through the same :func:`run_command` in this process."""
    from hf_seqmodels.training.core.cli import run_command

    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    base = ["--train_file", str(train), "--output_dir", str(tmp_path / "o")]
    result = run_script("train_lm.py", *base, "--preset", "tny")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "`--preset`='tny'" in lines[0]
    cases = {
        ("--preset", "tny"): "`--preset`='tny'",
        ("--preset", "tiny", "--optim", "adam"): "`optim`='adam'",
        ("--preset", "tiny", "--bogus", "1"): "--bogus",
        ("--preset", "tiny", "--lr_scheduler_type", "zaremba", "--lr_scheduler_kwargs", '{"min_lr_ratio": 1}'):
            "options of the zaremba schedule",
    }
    for flags, named in cases.items():
        assert run_command(lm_main, [*base, *flags]) == 2, flags
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    missing = str(tmp_path / "nope.txt")
    assert run_command(lm_main, ["--train_file", missing, "--preset", "tiny", "--output_dir", str(tmp_path / "o"),
                                 "--disable_tqdm"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: `--train_file` {missing!r} does not exist."
    with pytest.raises(ValueError, match="tny"):  # --debug shows where it came from: the error is not caught
        run_command(lm_main, [*base, "--preset", "tny", "--debug"])


def test_a_missing_data_file_is_one_line_naming_the_flag_and_the_path_in_every_script(tmp_path, capsys):
    from hf_seqmodels.training.bert.cli import main as bert_main
    from hf_seqmodels.training.classic.embeddings_cli import main as embeddings_main
    from hf_seqmodels.training.classic.ngram_cli import main as ngram_main
    from hf_seqmodels.training.core.cli import run_command
    from hf_seqmodels.training.finetune.cli import main as finetune_main
    from hf_seqmodels.training.seq2seq.cli import main as seq2seq_main

    text, pairs, folder = tmp_path / "train.txt", tmp_path / "pairs.tsv", tmp_path / "a_folder"
    text.write_text(CORPUS)
    pairs.write_text("source\ttarget\na b\tc d\n")
    folder.mkdir()
    missing = str(tmp_path / "nope.txt")
    out = ["--output_dir", str(tmp_path / "out")]
    cases = [
        (lm_main, ["--train_file", missing, "--preset", "tiny", *out], "train_file", missing),
        (lm_main, ["--train_file", str(text), "--validation_file", missing, "--preset", "tiny", *out],
         "validation_file", missing),
        (bert_main, ["--train_file", str(text), missing, "--preset", "tiny", *out], "train_file", missing),
        (seq2seq_main, ["--train_file", str(pairs), "--validation_file", str(folder), "--preset", "tiny", *out],
         "validation_file", str(folder)),
        (seq2seq_main, ["--train_source_file", missing, "--train_target_file", str(text), "--preset", "tiny", *out],
         "train_source_file", missing),
        (finetune_main, ["--train_file", missing, "--preset", "tiny", *out], "train_file", missing),
        (finetune_main, ["--train_file", str(pairs), "--test_file", missing, "--preset", "tiny", *out],
         "test_file", missing),
        (ngram_main, ["--train_file", missing, *out], "train_file", missing),
        (embeddings_main, ["--train_file", str(text), missing, *out], "train_file", missing),
    ]
    for main, argv, flag, path in cases:
        assert run_command(main, argv) == 2, argv
        lines = capsys.readouterr().err.strip().splitlines()
        assert lines and lines[-1].startswith(f"error: `--{flag}` {path!r} "), (argv, lines[-3:])
        assert "Errno" not in lines[-1] and len(lines[-1].split(path)) == 2


def lm_flags(train: Path, output_dir: Path, *extra: str) -> list[str]:
    return ["--train_file", str(train), "--tokenizer_kind", "char", "--min_frequency", "1", "--preset", "tiny",
            "--config_overrides", "hidden_size=16", "--per_device_train_batch_size", "4", "--block_size", "16",
            "--num_train_epochs", "1", "--logging_steps", "4", "--no_plot", "--disable_tqdm",
            "--output_dir", str(output_dir), *extra]


def test_output_folders_never_mix_runs_and_the_results_files_are_written(tmp_path, caplog):
    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    out = tmp_path / "run"
    results = lm_main(lm_flags(train, out))
    for name in ("train_results.json", "eval_results.json", "all_results.json", "trainer_state.json",
                 "training_args.json"):
        assert (out / name).is_file(), name
    state = json.loads((out / "trainer_state.json").read_text())
    steps = results["steps"]
    assert state["global_step"] == steps and steps % 4 != 0  # a short run whose last steps are not a full log window
    assert state["log_history"][-1]["step"] == steps and "loss" in state["log_history"][-1]  # logged anyway
    assert json.loads((out / "all_results.json").read_text())["eval_loss"] == results["eval_loss"]
    with pytest.raises(ValueError, match="holds the checkpoints of another run.*--overwrite_output_dir"):
        lm_main(lm_flags(train, out))
    with caplog.at_level(logging.WARNING):
        resumed = lm_main(lm_flags(train, out, "--resume_from_checkpoint", "latest", "--learning_rate", "0.5",
                                   "--num_train_epochs", "2"))
    assert "learning_rate=0.5; the run was started with learning_rate=0.001" in caplog.text
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert len({(r["step"], "loss" in r) for r in history}) == len(history), "a resumed run repeats no record"
    assert resumed["steps"] == 2 * steps
    lm_main(lm_flags(train, out, "--overwrite_output_dir"))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == [f"checkpoint-{steps}"]


def test_a_resume_with_weight_decay_turned_on_or_off_warns_and_trains_with_the_new_value(tmp_path, caplog):
    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    out = tmp_path / "run"
    steps = lm_main(lm_flags(train, out, "--weight_decay", "0"))["steps"]
    for decay, epochs in (("0.25", "2"), ("0", "3")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            resumed = lm_main(lm_flags(train, out, "--resume_from_checkpoint", "latest", "--weight_decay", decay,
                                       "--num_train_epochs", epochs))
        assert f"Resuming with weight_decay={float(decay)!r}" in caplog.text
        assert resumed["steps"] == int(epochs) * steps
        saved = torch.load(out / f"checkpoint-{resumed['steps']}" / "optimizer.pt", weights_only=True)
        assert [group["weight_decay"] for group in saved["param_groups"]] == [float(decay), 0.0]
        assert saved["state"], "the moments were carried over"


def test_max_train_samples_trains_on_the_first_windows_of_block_size_tokens(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    # 8 windows of 16 tokens (and the last target) over 4 stream rows: 32 tokens a row, two 16-token updates
    results = lm_main(lm_flags(train, tmp_path / "run", "--max_train_samples", "8"))
    assert results["steps"] == 2
    with pytest.raises(ValueError, match="`max_train_samples`=0"):
        lm_arguments(lm_flags(train, tmp_path / "o", "--max_train_samples", "0"))
    with pytest.raises(ValueError, match="`max_train_samples`=8: expected none with --streaming"):
        lm_arguments(lm_flags(train, tmp_path / "o", "--max_train_samples", "8", "--streaming", "--max_steps", "2",
                              "--tokenizer_name", "x", "--validation_file", str(train)))


def test_an_arguments_file_and_the_time_cap_message(tmp_path, caplog):
    train = tmp_path / "train.txt"
    train.write_text(CORPUS)
    flags = [f for f in lm_flags(train, tmp_path / "run", "--max_time_minutes", "1e-9") if f != "--no_plot"]
    settings = {}
    for i, flag in enumerate(flags):
        if flag.startswith("--"):
            value = flags[i + 1] if i + 1 < len(flags) and not flags[i + 1].startswith("--") else True
            try:  # JSON numbers for numbers, as a user writes them
                value = json.loads(value) if isinstance(value, str) and not value.startswith("{") else value
            except json.JSONDecodeError:
                pass
            settings[flag[2:]] = value
    (tmp_path / "args.json").write_text(json.dumps(settings))
    with caplog.at_level(logging.WARNING):
        results = lm_main([str(tmp_path / "args.json")])
    assert results["steps"] == 1
    assert "Time cap of 1e-09 minutes reached after step 1" in caplog.text
    assert (tmp_path / "run" / "eval_results.json").is_file()  # still evaluated and saved
    yaml_file = tmp_path / "args.yaml"
    yaml_file.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in {**settings, "output_dir": str(tmp_path / "y"),
                                                                        "preset": "nope"}.items()))
    with pytest.raises(ValueError, match="`--preset`='nope'"):
        lm_main([str(yaml_file)])


def test_the_learning_rate_curve_shows_the_schedule_as_it_ran(tmp_path):
    from hf_seqmodels.training.core.plotting import plot_learning_rate

    assert plot_learning_rate([{"step": 1, "train_loss": 2.0}], tmp_path) is None  # nothing logged: no picture
    history = [{"step": s, "train_loss": 1.0, "learning_rate": 0.1 * (1 - s / 10)} for s in range(1, 10)]
    path = plot_learning_rate(history + [{"step": 9, "eval_loss": 1.0}], tmp_path)
    assert path == tmp_path / "learning_rate.png" and path.stat().st_size > 0


def test_beam_search_over_a_held_out_set_shows_progress(capsys):
    from hf_seqmodels import RNNSeq2SeqConfig, RNNSeq2SeqForConditionalGeneration
    from hf_seqmodels.training.seq2seq.trainer import translate_ids

    class Tokenizer:
        pad_token_id = 0

        @staticmethod
        def batch_decode(ids, skip_special_tokens=True):
            return [" ".join(map(str, row.tolist())) for row in ids]

    torch.manual_seed(0)
    model = RNNSeq2SeqForConditionalGeneration(RNNSeq2SeqConfig.from_preset("tiny", vocab_size=12))
    sources = [[5, 6, 3], [7, 3], [8, 9, 10, 3]]
    texts = translate_ids(model, sources, Tokenizer(), batch_size=2, num_beams=2, max_new_tokens=3)
    assert len(texts) == 3 and all(isinstance(t, str) for t in texts)
    shown = capsys.readouterr().err
    assert "Translating (beam 2)" in shown and "3/3" in shown  # sentences done / all, with rate and time left
    translate_ids(model, sources, Tokenizer(), batch_size=2, num_beams=2, max_new_tokens=3, disable_tqdm=True)
    assert "Translating" not in capsys.readouterr().err


LAUNCHED_PROCESS = """
import atexit, logging, sys
from pathlib import Path
from hf_seqmodels.training.core.cli import run_command
marker = Path(sys.argv[1])
def main(argv):
    atexit.register(marker.write_text, "finalised")
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("run").info("logged before the end")
    print("printed before the end")  # stdout is a pipe here, so this waits in Python's buffer
sys.exit(run_command(main, []))
"""


@pytest.mark.parametrize("world_size", ["1", "2"])
def test_a_finished_launched_process_leaves_without_finalising_after_flushing_its_output(tmp_path, world_size):
    """A process of a multi-process launch leaves at once when its work is done: the interpreter's exit handlers
    (and its finalisation, where a collective backend's threads can abort the process) do not run, yet what it
    printed and logged comes out. A plain command (WORLD_SIZE 1) exits normally, which shows the test can tell."""
    marker = tmp_path / "finalised"
    env = {**os.environ, "WORLD_SIZE": world_size, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LAUNCHED_PROCESS, str(marker)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "printed before the end" in done.stdout
    assert "logged before the end" in done.stderr
    assert marker.exists() == (world_size == "1")


def test_launched_processes_reads_the_launchers_world_size(monkeypatch):
    for value, expected in [("4", 4), ("1", 1), ("", 1), ("two", 1), ("0", 1)]:
        monkeypatch.setenv("WORLD_SIZE", value)
        assert launched_processes() == expected
    monkeypatch.delenv("WORLD_SIZE")
    assert launched_processes() == 1
