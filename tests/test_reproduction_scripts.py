"""The shell scripts of ``training/reproductions``: they parse, and one that is stopped stops the trainings it
started in the background (``background.sh``) instead of leaving them running unseen."""

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "training" / "reproductions").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_reproduction_script_parses(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _starts_background_jobs(text: str) -> bool:
    """A command line ending in a single ``&`` (not ``&&``), comments aside."""
    return any(re.search(r"(?<!&)&\s*$", line.split("#", 1)[0]) for line in text.splitlines())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_script_that_runs_trainings_in_the_background_stops_them_when_stopped(script):
    text = script.read_text(encoding="utf-8")
    if not _starts_background_jobs(text):
        pytest.skip("starts nothing in the background")
    sources = re.findall(r"^source (training/reproductions/\S+)", text, flags=re.MULTILINE)
    covered = "training/reproductions/background.sh" in sources or any(
        "source training/reproductions/background.sh" in (ROOT / path).read_text(encoding="utf-8")
        for path in sources
    )
    assert covered, f"{script.name} starts background jobs without sourcing background.sh"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie has ended: only its parent has not read its status yet
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # reaped between the two looks
        return False


@pytest.mark.parametrize("with_helper", [True, False])
def test_stopping_a_script_stops_its_background_runs_and_theirs(tmp_path, with_helper):
    """The script runs two "trainings" in the background, each a shell function that starts a child process
    (as a reproduction's run() starts python); SIGTERM to the script alone must end those grandchildren too.
    Without background.sh they would outlive it (the second case shows the test can tell)."""
    pids = tmp_path / "pids"
    script = tmp_path / "script.sh"
    script.write_text(
        "set -euo pipefail\n"
        + (f"source {ROOT}/training/reproductions/background.sh\n" if with_helper else "")
        + f'run() {{ sleep 120 & echo $! >> "{pids}"; wait; }}\n'
        "run &\nrun &\nwait\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(["bash", str(script)], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        sleepers = [int(pid) for pid in pids.read_text().split()]
        assert len(sleepers) == 2
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) != 0
        deadline = time.monotonic() + 5
        while any(map(_alive, sleepers)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [_alive(pid) for pid in sleepers] == [not with_helper] * 2
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group is empty when everything stopped as it should
            os.killpg(process.pid, signal.SIGKILL)
