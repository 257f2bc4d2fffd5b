"""The README and the documentation's topic pages run as written on a fresh clone.

The documents are :data:`DOCUMENTS`: the README, then the pages of ``docs/`` that took over its usage sections.
Python: every ```python block runs on its own, in a fresh Python and an empty temporary folder, so each block
carries its own imports and data.

Commands: the ```bash blocks run in order (document by document), in one temporary folder laid out like a fresh clone (the repository's
tracked top-level files and folders linked in, nothing else), except
- the two setup commands of "Two commands for a fresh machine" (CI runs the test command itself, and
  ``tests/test_demo.py`` runs the demo), and
- a block right after a line ``<!-- not run in tests: REASON -->`` (data a fresh clone lacks, GPUs, several
  machines, the network); the training-script commands of such blocks that are written out in full still have
  their arguments parsed.

Each command runs as written, made tiny by one mechanical change (:data:`TINY`): for a script named there,
``--preset NAME`` becomes ``--preset tiny`` and the script's flags of :data:`TINY` are appended (argparse keeps
the last value of a flag given twice). A command's output folder (``--output_dir``/``--output``) must exist after it.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the documents whose code runs, in the order their commands run (training writes what export and push read)
DOCUMENTS = [README] + [ROOT / "docs" / name for name in (
    "usage.md", "tokenization.md", "training.md", "ngram.md", "embeddings.md", "distributed.md", "translation.md",
    "bert.md", "hub.md", "export.md")]
SKIP_MARK = re.compile(r"<!-- not run in tests: (?P<reason>[^>]*?) -->\s*$")

_TRAINING = ["--max_steps", "2", "--warmup_steps", "0", "--per_device_train_batch_size", "4",
             "--per_device_eval_batch_size", "16", "--logging_steps", "1", "--disable_tqdm", "true"]
#: flags appended to a command of each script (after ``--preset NAME`` became ``--preset tiny``)
TINY: dict[str, list[str]] = {
    "training/train_lm.py": _TRAINING + ["--block_size", "16"],
    "training/train_seq2seq.py": _TRAINING + ["--max_eval_samples", "8", "--max_predict_samples", "4",
                                              "--generation_max_length", "8"],
    "training/pretrain_bert.py": _TRAINING + ["--max_seq_length", "32"],
    "training/finetune.py": _TRAINING + ["--max_eval_samples", "8", "--max_predict_samples", "4"],
    "training/train_embeddings.py": ["--num_train_epochs", "1", "--vector_size", "8"],
}
#: the module whose ``parse_arguments(argv)`` reads each training script's command line
PARSERS = {"training/train_lm.py": "hf_seqmodels.training.lm.cli",
           "training/train_seq2seq.py": "hf_seqmodels.training.seq2seq.cli",
           "training/pretrain_bert.py": "hf_seqmodels.training.bert.cli",
           "training/finetune.py": "hf_seqmodels.training.finetune.cli"}
SETUP = "python3 -m venv "


@dataclass
class Block:
    language: str
    body: str
    line: int          # of the opening fence
    heading: str       # the section it belongs to
    skip_reason: str | None
    document: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.document} line {self.line}"


FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.S | re.M)


def readme_blocks(language: str, text: str | None = None, document: Path = README) -> list[Block]:
    """The fenced blocks of ``language`` of ``document`` (or of ``text``), in order."""
    text = document.read_text(encoding="utf-8") if text is None else text
    name = document.relative_to(ROOT).as_posix()
    blocks = []
    for match in FENCE.finditer(text):
        if match.group(1) != language:
            continue
        before = text[:match.start()]
        headings = re.findall(r"^#+ (.+)$", FENCE.sub("", before), flags=re.M)
        mark = SKIP_MARK.search(before.rstrip() + "\n")
        blocks.append(Block(language, match.group(2), before.count("\n") + 1, headings[-1] if headings else "",
                            mark.group("reason") if mark else None, name))
    return blocks


def document_blocks(language: str) -> list[Block]:
    """The blocks of ``language`` of every document of :data:`DOCUMENTS`, in order."""
    return [block for document in DOCUMENTS for block in readme_blocks(language, document=document)]


def commands(block: Block) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments dropped."""
    logical = block.body.replace("\\\n", " ")
    return [tokens for line in logical.splitlines() if (tokens := shlex.split(line, comments=True))]


def script_of(tokens: list[str]) -> str | None:
    """``training/x.py`` when ``tokens`` run a repository script with ``python``, else None."""
    return tokens[1] if len(tokens) > 1 and tokens[0] == "python" and tokens[1].endswith(".py") else None


def tiny(tokens: list[str]) -> list[str]:
    """``tokens`` made tiny by the rule of the module docstring."""
    script = script_of(tokens)
    if script not in TINY:
        return list(tokens)
    out = list(tokens)
    for i, token in enumerate(out[:-1]):
        if token == "--preset":
            out[i + 1] = "tiny"
    return out + TINY[script]


def output_folder(tokens: list[str]) -> str | None:
    for flag in ("--output_dir", "--output"):
        if flag in tokens:
            return tokens[tokens.index(flag) + 1]
    return None


def run_commands() -> list[tuple[Block, list[str]]]:
    return [(block, tokens) for block in document_blocks("bash") if block.skip_reason is None
            for tokens in commands(block) if not " ".join(tokens).startswith(SETUP)]


def fresh_clone(folder: Path) -> Path:
    """``folder`` with the repository's tracked top-level entries linked in."""
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = {line.split("/")[0] for line in tracked.splitlines() if line}
    except (OSError, subprocess.CalledProcessError):
        names = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in ("runs", "outputs")}
    for name in sorted(names):
        if (ROOT / name).exists():
            (folder / name).symlink_to(ROOT / name)
    return folder


def environment() -> dict[str, str]:
    """This Python first on PATH (``python``, ``hf-seqmodels``), the package importable, no network."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------------------------ structure ----
def test_readme_has_the_two_commands_and_ci_runs_the_test_command():
    setup = [" ".join(tokens) for block in readme_blocks("bash") for tokens in commands(block)
             if " ".join(tokens).startswith(SETUP)]
    text = README.read_text(encoding="utf-8")
    raw = re.findall(r"```bash\n(python3 -m venv .*?)\n```", text)
    assert len(setup) == 2 and len(raw) == 2 and raw[0].endswith("hf-seqmodels demo")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert raw[1] in ci


def test_every_command_is_run_or_says_why_not():
    run = run_commands()
    for block, tokens in run:
        line = " ".join(tokens)
        assert "..." not in tokens and "../shared" not in line, (block.where, line)
    for block in document_blocks("bash"):
        assert block.skip_reason is None or block.skip_reason.strip(), block.where
    # the runs cover every kind of command a fresh clone can run from the README
    ran = {script_of(tokens) or tokens[0] + " " + tokens[1] for _, tokens in run}
    assert {"training/train_lm.py", "training/train_ngram.py", "training/train_embeddings.py",
            "training/pretrain_bert.py", "hf-seqmodels push", "hf-seqmodels export"} <= ran


def test_tiny_rule_replaces_the_preset_and_appends_the_script_flags():
    tokens = ["python", "training/pretrain_bert.py", "--preset", "bert-mini", "--max_seq_length", "128"]
    made = tiny(tokens)
    assert made[:6] == ["python", "training/pretrain_bert.py", "--preset", "tiny", "--max_seq_length", "128"]
    assert made[6:] == TINY["training/pretrain_bert.py"] and made.count("--max_seq_length") == 2
    assert tiny(["hf-seqmodels", "export", "--model", "m"]) == ["hf-seqmodels", "export", "--model", "m"]
    block = Block("bash", 'python a.py --x "a b" \\\n    --y 1   # note\n# comment\nb --z\n', 1, "", None)
    assert commands(block) == [["python", "a.py", "--x", "a b", "--y", "1"], ["b", "--z"]]


def test_readme_commands_kept_out_of_the_runs_parse(monkeypatch):
    """A command kept out of the runs (its data is missing) still names only flags and values its script takes."""
    from hf_seqmodels.training.core import cli

    monkeypatch.setattr(cli, "check_data_files", lambda parsed: None)  # the data is missing by design here
    checked = 0
    for block in document_blocks("bash"):
        if block.skip_reason is None:
            continue
        for tokens in commands(block):
            script = script_of(tokens)
            if script in PARSERS and "..." not in tokens:
                importlib.import_module(PARSERS[script]).parse_arguments(tokens[2:])
                checked += 1
    assert checked >= 4  # seq2seq, the tagger, BERT and TextCNN on SST-2


# ----------------------------------------------------------------------------------------------------- python ----
def _accuracy_beats_chance(out: str, folder: Path):
    accuracy = float(re.search(r"held-out accuracy: ([0-9.]+)", out).group(1))
    assert accuracy >= 0.8, out  # chance is 0.5


def _tokenizer_output(out: str, folder: Path):
    assert "['i', 'do', 'not', 'like', 'html', 'today']" in out


def _shared_folder(out: str, folder: Path):
    assert (folder / "my-share" / "README.md").exists() and (folder / "my-share" / "modeling_rnn.py").exists()


#: what a block's run must show beyond its exit status, by the heading of its section
def _tour_output(out: str, folder: Path):
    assert "cell_type" in out and "'lstn'" in out, out  # the config error names the field and the value
    assert (folder / "my-gru-lm" / "model.safetensors").exists()


CHECKS = {"Tokenizers": _tokenizer_output, "Fine-tuning a classifier with `Trainer`": _accuracy_beats_chance,
          "Sharing on the Hub": _shared_folder, "A tour": _tour_output}


def test_every_python_block_has_a_test_id_and_the_checks_find_their_blocks():
    blocks = document_blocks("python")
    assert len(blocks) >= 9 and readme_blocks("python")
    assert set(CHECKS) <= {block.heading for block in blocks}


#: sections whose block takes over 20 s (the ONNX export and its parity checks)
SLOW = {"Export and deployment"}


@pytest.mark.parametrize("block", [
    pytest.param(block, marks=[pytest.mark.slow] if block.heading in SLOW else [],
                 id=f"{Path(block.document).stem}-line{block.line}-{block.heading[:30]}")
    for block in document_blocks("python")])
def test_readme_python_block_runs_on_its_own(block, tmp_path):
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", block.body], cwd=tmp_path, env=environment(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{block.where}:\n{result.stderr[-4000:]}"
    CHECKS.get(block.heading, lambda out, folder: None)(result.stdout, tmp_path)
    print(f"{block.where} ({block.heading}): {time.perf_counter() - started:.1f} s")


# --------------------------------------------------------------------------------------------------- commands ----
@pytest.mark.slow
def test_readme_commands_run_at_tiny_sizes(tmp_path):
    clone = fresh_clone(tmp_path)
    env = environment()
    for block, tokens in run_commands():
        command = tiny(tokens)
        started = time.perf_counter()
        result = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        shown = shlex.join(command)
        assert result.returncode == 0, f"{block.where}: {shown}\n{result.stderr[-4000:]}"
        folder = output_folder(command)
        assert folder is None or (clone / folder).is_dir(), f"{shown} wrote no {folder}"
        print(f"{block.where}: {time.perf_counter() - started:.1f} s  {shown}")
