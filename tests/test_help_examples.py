"""Every usage example the package shows is accepted by the parser of its command.

The examples are found, not listed: every line that starts a command (``python training/<script>.py``,
``python tokenizer_scripts/<script>.py``, ``accelerate launch ... training/<script>.py``, ``hf-seqmodels
<command>``) in the ``--help`` text of every command and in the docstring of every module of the package and of
the scripts. Each is parsed by its command's parser (``build_parser()``; nothing is run), so an example with a
flag the command does not take, a value outside a flag's choices, or a preset its family lacks fails here with
the example's text. An example that elides arguments (``...``) only has to use flags that exist.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

from hf_seqmodels.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("training/*.py"), *ROOT.glob("tokenizer_scripts/*.py")])
#: a line that starts a command: optional environment variables, then the launcher
COMMAND_LINE = re.compile(r"^\s*(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:python\s|accelerate\s+launch\s|torchrun\s|hf-seqmodels\s)")
SCRIPT_PATH = re.compile(r"^(?:\./)?((?:training|tokenizer_scripts)/\w+\.py)$")
ELIDED = "..."


def script_module(script: str) -> str:
    """The module whose ``main`` the script runs (``from hf_seqmodels.x import main``)."""
    source = (ROOT / script).read_text(encoding="utf-8")
    return re.search(r"^from (hf_seqmodels[\w.]*) import (?:.*\b)?main\b", source, re.M).group(1)


def command_parser(example: str) -> tuple[argparse.ArgumentParser, list[str]] | None:
    """``(parser, arguments)`` of the command line ``example`` (a ``<placeholder>`` is one argument); None for a
    command of no script of the package (a benchmark, pip)."""
    tokens = shlex.split(re.sub(r"<[^>]*>", "placeholder", example))
    for index, token in enumerate(tokens):
        if match := SCRIPT_PATH.match(token):
            if not (ROOT / match.group(1)).is_file():
                raise AssertionError(f"{match.group(1)} is no script of the package")
            return importlib.import_module(script_module(match.group(1))).build_parser(), tokens[index + 1:]
        if token == "hf-seqmodels":
            command, arguments = tokens[index + 1], tokens[index + 2:]
            if command in COMMANDS:
                module = importlib.import_module(COMMANDS[command], "hf_seqmodels")
                return module.build_parser(), arguments
            return build_parser(), [command, *arguments]
    return None


def examples_in(text: str) -> list[str]:
    """The command lines of ``text``, each with its continuation lines (ending in a backslash) joined."""
    found, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        if not COMMAND_LINE.match(line):
            continue
        example = line.strip()
        while example.endswith("\\") and index + 1 < len(lines):
            index += 1
            example = example[:-1].rstrip() + " " + lines[index].strip()
        found.append(example)
    return found


def help_text(parser: argparse.ArgumentParser, prefix: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser.parse_args([*prefix, "--help"])
    return out.getvalue()


def sources() -> dict[str, str]:
    """``{where: text}``: every module docstring of the package and its scripts, and every command's ``--help``."""
    texts = {}
    for path in sorted([*(ROOT / "hf_seqmodels").rglob("*.py"), *SCRIPTS]):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if docstring:
            texts[str(path.relative_to(ROOT))] = docstring
    top = build_parser()
    for command in ("demo", "push", "export", "presets"):
        texts[f"hf-seqmodels {command} --help"] = help_text(top, [command])
    for command, module in COMMANDS.items():
        texts[f"hf-seqmodels {command} --help"] = help_text(
            importlib.import_module(module, "hf_seqmodels").build_parser(), [])
    return texts


EXAMPLES = sorted({(example, where) for where, text in sources().items() for example in examples_in(text)})


def test_the_examples_are_found():
    """Every script shows an example, and the training commands' and the demo's ``--help`` show theirs."""
    shown = " ".join(example for example, _ in EXAMPLES)
    for script in SCRIPTS:
        assert str(script.relative_to(ROOT)) in shown, script
    wheres = {where for _, where in EXAMPLES}
    assert {f"hf-seqmodels {command} --help" for command in ("train-lm", "train-seq2seq", "pretrain-bert", "finetune",
                                                             "ngram", "embeddings", "demo")} <= wheres


def rejection(parser: argparse.ArgumentParser, arguments: list[str]) -> str | None:
    """Why ``parser`` refuses ``arguments`` (its error message), or None. An elided example (``...``) gets a
    placeholder for each required flag it leaves out and is parsed without the dataclasses' checks of
    completeness; a whole one is parsed into its dataclasses (a script's own argument checks included)."""
    elided = ELIDED in arguments
    arguments = [token for token in arguments if token != ELIDED]
    if elided:
        for action in parser._actions:  # argparse lists no required flags publicly
            if action.required and not set(action.option_strings) & set(arguments):
                value = str(next(iter(action.choices))) if action.choices else "placeholder"
                arguments += [action.option_strings[0], value] if action.option_strings else [value]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            if hasattr(parser, "parse_args_into_dataclasses") and not elided:
                parser.parse_args_into_dataclasses(args=arguments)
            else:
                parser.parse_args(arguments)
    except SystemExit:
        return errors.getvalue().strip() or "exit"
    except ValueError as error:
        return str(error)
    return None


@pytest.mark.parametrize("example, where", EXAMPLES, ids=[f"{where}: {example[:60]}" for example, where in EXAMPLES])
def test_every_example_parses(example, where):
    command = command_parser(example)
    if command is None:
        pytest.skip("not a command of the package")
    problem = rejection(*command)
    assert problem is None, f"{where} shows\n    {example}\nwhich its parser refuses: {problem}"


def test_a_wrong_example_is_caught():
    parser, arguments = command_parser(
        "python training/train_embeddings.py --train_file corpus.txt --epochs 5 --output_dir runs/w2v")
    assert "unrecognized arguments: --epochs" in rejection(parser, arguments)
    parser, arguments = command_parser("hf-seqmodels demo --minutes 1 ...")
    assert "--minutes is now --max_time_minutes" in rejection(parser, arguments)
    parser, arguments = command_parser("python training/train_lm.py --preset zaremba-huge --output_dir x")
    assert "zaremba-huge" in rejection(parser, arguments)
