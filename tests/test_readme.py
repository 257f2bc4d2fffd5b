"""The README's Python examples run as written (in order, in one fresh Python, in a temporary folder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_the_two_commands_and_ci_runs_the_test_command():
    text = README.read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(python3 -m venv .*?)\n```", text)
    assert len(commands) == 2 and commands[0].endswith("hf-seqmodels demo")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci


@pytest.mark.slow
def test_readme_examples_run(tmp_path):
    script = "\n".join(python_blocks())
    env = {**os.environ, "PYTHONPATH": str(README.parent)}  # the package, even when not installed
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "['i', 'do', 'not', 'like', 'html', 'today']" in result.stdout
    assert (tmp_path / "my-share" / "README.md").exists()
    assert (tmp_path / "my-share" / "modeling_rnn.py").exists()
