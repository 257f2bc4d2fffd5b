"""Every committed model card still describes what its reproduction script trains today.

A preset's recipe or a command-line default can change under a script without anyone running it again (the
scripts train for hours; CI does not run them). Here each script in ``training/reproductions`` runs in a scratch
copy of the checkout with ``python`` replaced by a recorder: every ``python training/<cli>.py ...`` command it
would start is written down instead of run. Each recorded command is then resolved by its command line's own
``parse_arguments`` (presets, recipes and defaults applied) and compared, row by row, with the "Training
procedure" table of the card that command produced in ``model_cards/``. A difference fails the test unless
:data:`KNOWN_DIFFERENCES` states it with its reason.
"""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hf_seqmodels.registry import family_named
from hf_seqmodels.training.core import precision
from hf_seqmodels.training.core.cards import engine_card_arguments

ROOT = Path(__file__).resolve().parents[1]
CARDS = ROOT / "model_cards"
COMMAND_LINES = {"training/train_lm.py": "lm", "training/train_seq2seq.py": "seq2seq",
                 "training/pretrain_bert.py": "bert", "training/finetune.py": "finetune"}


@dataclass
class Reproduction:
    """``bash training/reproductions/<script> <args>`` with ``env``; ``cards`` maps the ``--output_dir`` of each
    training command to the card it produced. ``{data}`` in ``args`` is a stand-in shared-data folder."""

    script: str
    args: list[str]
    cards: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    existing: list[str] = field(default_factory=list)  # files an earlier step of the reproduction leaves behind
    # models an earlier step leaves behind, {folder: (family, preset)}: a run that continues from one takes its
    # family's recipe, read from its config
    models: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __str__(self) -> str:
        settings = " ".join(f"{k}={v}" for k, v in self.env.items())
        return f"{settings} {self.script} {' '.join(self.args)}".strip()


LADDER_30 = ("transformer", "lstm", "gru", "rnn", "nnlm")
REPRODUCTIONS = [
    Reproduction("shakespeare_lm_ladder_30min.sh", ["{data}/tinyshakespeare/input.txt"],
                 {f"runs/shakespeare-{m}-1core30": f"shakespeare-char-{m}-1core30" for m in LADDER_30}),
    Reproduction("shakespeare_lm_ladder_30min.sh", ["{data}/tinyshakespeare/input.txt"],
                 {"runs/shakespeare-transformer-2core30": "shakespeare-char-transformer-2core30"},
                 env={"THREADS": "2", "STAGES": "transformer"}),
    Reproduction("shakespeare_lm_ladder.sh", ["{data}/tinyshakespeare/input.txt"],
                 {f"runs/shakespeare-{m}": f"shakespeare-char-{m}" for m in ("nnlm", "rnn", "gru", "lstm")}),
    Reproduction("multi30k_attention.sh", ["{data}/multi30k", "25"],
                 {f"runs/multi30k-{m}": f"multi30k-{m}" for m in ("none", "bahdanau", "luong-general", "transformer")}),
    Reproduction("transformers_gpu.sh", ["{data}/tinyshakespeare/input.txt", "{data}/multi30k"],
                 {"runs/shakespeare-transformer-gpu": "shakespeare-char-nanogpt-gpu",
                  "runs/multi30k-transformer-gpu": "multi30k-transformer-gpu"}),
    Reproduction("transformers_gpu.sh", ["{data}/tinyshakespeare/input.txt", "{data}/multi30k"],
                 {"runs/multi30k-transformer-gpu": "multi30k-transformer-cpu60"}, env={"MINUTES_MT": "60"}),
    Reproduction("bert_wikitext2_sst2.sh", ["{data}", "1", "42"],
                 {"runs/bert-mini-wikitext2": "bert-mini-wikitext2",
                  "runs/sst2-bert-mini-pretrained-seed42": "sst2-bert-mini-pretrained",
                  "runs/sst2-bert-mini-scratch-seed42": "sst2-bert-mini-scratch"}),
    Reproduction("bert_wikitext2_sst2_tapt.sh", ["{data}", "1", "42", "3e-4"],
                 {"runs/bert-mini-wikitext2-sst2text": "bert-mini-wikitext2-sst2text",
                  "runs/sst2-bert-mini-tapt-seed42-lr3e-4": "sst2-bert-mini-tapt"},
                 existing=["runs/bert-mini-wikitext2/model.safetensors"],
                 models={"runs/bert-mini-wikitext2": ("bert", "bert-mini")}),
    Reproduction("bert_sst2text_only.sh", ["{data}", "1", "42", "3e-4"],
                 {"runs/bert-mini-sst2text": "bert-mini-sst2text",
                  "runs/sst2-bert-mini-sst2text-seed42-lr3e-4": "sst2-bert-mini-sst2text"}),
]

#: cards no script reproduces, and why
NOT_FROM_A_SCRIPT = {
    "shakespeare-char-transformer_lm": "the 8-minute Transformer row: its command is written out in model_cards/README.md",
    "shakespeare-char-nanogpt-cpu": "one command, `train_lm.py --preset nanogpt-cpu`: test_the_nanogpt_cpu_card_is_its_preset",
    "word-embeddings": "vectors trained by embedding scripts, not by a training command line with a card table",
}

#: differences between a card and what its script trains today: {card: {row: (card's value, today's value)}}
KNOWN_DIFFERENCES = {
    # run with a 40-minute cap that never bound (it ended at its 2,200 steps after 1,753 s); the script caps at 30
    "shakespeare-char-transformer-1core30": {"time cap (minutes)": ("40", "30")},
    # the committed BERT pretraining runs were trained in float32; their scripts now train under --bf16
    "bert-mini-wikitext2": {"mixed precision": ("no", "bf16")},
    "bert-mini-sst2text": {"mixed precision": ("no", "bf16")},
    "bert-mini-wikitext2-sst2text": {"mixed precision": ("no", "bf16")},
    # the 8-minute ladder ran before its cosine schedule was floored at a tenth of the peak rate (min_lr_ratio)
    # and before cards listed the mixed precision
    **{f"shakespeare-char-{m}": {"schedule": ("cosine, 100 warm-up steps", "cosine, 100 warm-up steps, min_lr_ratio 0.1"),
                                 "mixed precision": (None, "no")} for m in ("nnlm", "rnn", "gru", "lstm")},
}

#: optimizer names a card may use for today's name of the same optimizer
RENAMED = {"adamw": "adamw_torch"}


def _stand_in_data(folder: Path) -> Path:
    """The shared-data layout with a line of text in each file the scripts read themselves."""
    for name in ("train", "val", "test_2016_flickr"):
        for language in ("en", "de"):
            path = folder / "multi30k" / f"{name}.{language}.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(path, "wt", encoding="utf-8") as out:
                out.write("a small text\n")
    for name in ("sst2/train.tsv", "sst2/dev.tsv"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("sentence\tlabel\na small text\t1\n", encoding="utf-8")
    for name in ("wikitext2-heldout/valid.txt", "wikitext2-heldout/test.txt", "tinyshakespeare/input.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("a small text\n", encoding="utf-8")
    return folder


def record_commands(reproduction: Reproduction, tmp_path: Path) -> dict[str, list[str]]:
    """Run the script with a ``python`` that records ``training/*.py`` and ``tokenizer_scripts/*.py`` commands
    instead of running them (any other ``python`` call runs); ``{output_dir: argv}`` of the training commands."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "training" / "reproductions", checkout / "training" / "reproductions")
    for name in reproduction.existing:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).touch()
    for folder, (family, preset) in reproduction.models.items():
        family_named(family).config_class.from_preset(preset).save_pretrained(checkout / folder)
    record = tmp_path / "commands.jsonl"
    recorder = (
        "import json, os, sys\n"
        "with open(os.environ['RECORD_COMMANDS'], 'a', encoding='utf-8') as out:\n"
        "    out.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    shim.write_text(
        "#!/usr/bin/env bash\n"
        'case "$1" in training/*.py|tokenizer_scripts/*.py)\n'
        f'  exec "{sys.executable}" -c "$RECORDER" "$@";;\n'
        "esac\n"
        f'exec "{sys.executable}" "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    data = _stand_in_data(tmp_path / "data")
    env = {**os.environ, **reproduction.env, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "RECORD_COMMANDS": str(record), "RECORDER": recorder}
    args = [arg.format(data=data) for arg in reproduction.args]
    # the script ends in an error once it reads results its recorded runs never wrote; what it would run is kept
    subprocess.run(["bash", str(checkout / "training" / "reproductions" / reproduction.script), *args],
                   cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
    commands = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()] if record.exists() else []
    return {argv[argv.index("--output_dir") + 1]: argv for argv in commands
            if argv[0] in COMMAND_LINES and "--output_dir" in argv}


def card_table(card: str) -> dict[str, str]:
    """The rows of the card's "Training procedure" table."""
    text = (CARDS / card / "README.md").read_text(encoding="utf-8")
    section = text.split("## Training procedure", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| ([^|]+?) \| (.*?) \|$", section, flags=re.MULTILINE))


def _shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)  # as hub.write_model_card shows it


def differences(card: str, argv: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """``{row: (card's value, today's value)}`` for the training-procedure rows the command line decides: the
    engine's (optimizer, rate, schedule, clipping, epochs, time cap, precision, seed, accumulation, ...; not
    the hardware) and, on older cards that list arguments by name, each such argument."""
    command_line = importlib.import_module(f"hf_seqmodels.training.{COMMAND_LINES[argv[0]]}.cli")
    _, _, args = command_line.parse_arguments(argv[1:])
    today = {key: _shown(value) for key, value in engine_card_arguments(args).items() if key != "hardware"}
    optional = {"gradient accumulation (batches per update)", "activation checkpointing", "torch.compile"}
    rows = card_table(card)
    for key in rows:
        if key not in today and hasattr(args, key):  # an older card's row named by its argument
            today[key] = _shown(getattr(args, key))
    engine_rows = rows.keys() & {"optimizer", "learning rate", "schedule"}
    found = {}
    for key in today.keys() | rows.keys():
        if key not in today:
            continue  # a row of the family's own (batch, label smoothing, masking) or the hardware
        if not engine_rows and key not in rows:
            continue  # an older card that lists arguments by name lists only those it lists
        card_value = rows.get(key)
        if key == "optimizer" and card_value:
            name, _, rest = card_value.partition(" ")
            card_value = f"{RENAMED.get(name, name)} {rest}".strip()
        if card_value != today[key] and not (card_value is None and key in optional and today[key] in ("None", "False")):
            found[key] = (card_value, today[key])
    return found


@pytest.fixture(autouse=True)
def on_a_device_with_bf16_units(monkeypatch):
    """The cards' runs trained on GPUs or on CPUs with AVX512-BF16, where a preset's bf16 applies: resolve their
    commands as there, whatever this machine's CPU."""
    monkeypatch.setattr(precision, "bf16_is_fast", lambda device: (True, "faked"))


def test_every_card_is_checked_or_says_why_not():
    checked = {card for reproduction in REPRODUCTIONS for card in reproduction.cards.values()}
    folders = {path.name for path in CARDS.iterdir() if (path / "README.md").is_file()}
    assert folders == checked | set(NOT_FROM_A_SCRIPT), (
        f"cards without a reproduction here: {sorted(folders - checked - set(NOT_FROM_A_SCRIPT))}; "
        f"listed here without a card: {sorted((checked | set(NOT_FROM_A_SCRIPT)) - folders)}")
    assert set(KNOWN_DIFFERENCES) <= checked


@pytest.mark.parametrize("reproduction", REPRODUCTIONS, ids=str)
def test_a_reproduction_still_trains_what_its_cards_record(reproduction, tmp_path, monkeypatch):
    commands = record_commands(reproduction, tmp_path)
    monkeypatch.chdir(tmp_path / "checkout")  # the commands' relative paths (an earlier run's model) lead there
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = set(reproduction.cards) - set(commands)
    assert not missing, f"{reproduction} no longer runs {sorted(missing)} (it runs {sorted(commands)})"
    found = {card: differences(card, commands[output_dir]) for output_dir, card in reproduction.cards.items()}
    expected = {card: KNOWN_DIFFERENCES.get(card, {}) for card in reproduction.cards.values()}
    assert found == expected


@pytest.fixture
def in_a_folder_with_input_txt(tmp_path, monkeypatch):
    """The commands below name `--train_file input.txt`, which the parser checks exists."""
    (tmp_path / "input.txt").write_text("to be or not to be\n")
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("in_a_folder_with_input_txt")
def test_the_nanogpt_cpu_card_is_its_preset():
    """The card's command is `train_lm.py --train_file ... --preset nanogpt-cpu --output_dir ...` and nothing else."""
    argv = ["training/train_lm.py", "--train_file", "input.txt", "--preset", "nanogpt-cpu", "--output_dir", "out"]
    assert differences("shakespeare-char-nanogpt-cpu", argv) == {}


@pytest.mark.usefixtures("in_a_folder_with_input_txt")
def test_a_changed_recipe_is_found():
    """The comparison can fail: the 2-core Transformer card against its command with one more accumulated batch
    per update and another peak rate (as a preset's new recipe would give it)."""
    argv = ["training/train_lm.py", "--train_file", "input.txt", "--model_family", "transformer_lm", "--preset",
            "nanogpt-shakespeare-char", "--bf16", "--max_time_minutes", "30", "--seed", "1234",
            "--gradient_accumulation_steps", "2", "--learning_rate", "2e-3", "--output_dir", "out"]
    found = differences("shakespeare-char-transformer-2core30", argv)
    assert found["learning rate"] == ("0.001", "0.002")
    assert found["gradient accumulation (batches per update)"] == (None, "2")
