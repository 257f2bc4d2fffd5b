"""The process-tree sampling of ``bench_data_scale --launch_megabytes`` (benchmarks/data_scale_launch.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.data_scale_launch import _memory_kb, descendants


def test_descendants_and_their_memory_are_found():
    """A child and its grandchild are below this process; each has an RSS and a PSS, and an exited one has 0."""
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'])"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(200):  # until the grandchild has started
            tree = descendants(os.getpid())
            if len(tree) >= 3:
                break
            subprocess.run(["sleep", "0.05"])
        assert tree[0] == os.getpid() and child.pid in tree and len(tree) >= 3
        rss, pss = _memory_kb(child.pid)
        assert rss > 1000 and 0 < pss <= rss  # kB: a Python interpreter
    finally:
        for pid in reversed(descendants(child.pid)):
            os.kill(pid, 9)
        child.wait()
    assert _memory_kb(child.pid) == (0, 0)
