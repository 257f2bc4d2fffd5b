"""The conformance tests share ``tests/model_test_utils.py`` with the per-family tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
