"""Helpers shared by the model tests: tiny inputs, fresh-Python remote-code loading."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import torch
from safetensors.torch import load_file

# the first lines of every script run by run_in_python_without_package
_CHECK_NO_PACKAGE = (
    "import importlib.util, sys\n"
    "if importlib.util.find_spec('hf_seqmodels') is not None:\n"
    "    raise SystemExit('hf_seqmodels should not be importable here')\n"
)


@functools.cache
def python_without_package() -> str:
    """The interpreter of a fresh virtual environment that sees this environment's packages (torch,
    transformers, ...) but not ``hf_seqmodels``, as on a machine where only those are installed.

    The environment is made once per machine and interpreter (``python -m venv --without-pip``); a ``.pth``
    line puts this environment's site-packages on its path. Python does not run the ``.pth`` files of a
    folder added that way, so the editable install of ``hf_seqmodels`` (a ``.pth`` import hook) stays out.
    """
    key = hashlib.sha1(sys.prefix.encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"hfsm-without-package-{key}"
    python = root / "bin" / "python"
    if not (root / "ready").exists():
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "borrowed_site_packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        (root / "ready").touch()
    return str(python)


def run_in_python_without_package(script: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``script`` with :func:`python_without_package` (after checking that ``hf_seqmodels`` is not
    importable there); fails the test with the end of stderr if it fails."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # a checkout on it
    result = subprocess.run([python_without_package(), "-c", _CHECK_NO_PACKAGE + script], capture_output=True,
                            text=True, cwd=cwd, timeout=timeout, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def random_ids(batch: int, length: int, vocab_size: int, seed: int = 0, low: int = 4) -> torch.LongTensor:
    """Token ids that avoid the special tokens (pad 0, unk 1, bos 2, eos 3)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab_size, (batch, length), generator=generator)


def left_pad(rows: list[torch.Tensor], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack 1-D id tensors into a left-padded batch and its attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = r
        mask[i, width - len(r) :] = 1
    return ids, mask


def right_pad(rows: list[torch.Tensor], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def run_without_package(folder: Path, auto_class: str, input_ids: torch.Tensor, out_file: Path) -> dict:
    """Load ``folder`` with ``auto_class.from_pretrained(..., trust_remote_code=True)`` in a fresh virtual
    environment without ``hf_seqmodels`` (:func:`python_without_package`); save its logits to ``out_file`` and return its report."""
    script = textwrap.dedent(
        f"""
        import json, torch, transformers
        from safetensors.torch import save_file
        model = getattr(transformers, {auto_class!r}).from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        ids = torch.tensor({input_ids.tolist()!r})
        with torch.no_grad():
            logits = model(ids).logits
        save_file({{"logits": logits.contiguous()}}, {str(out_file)!r})
        print(json.dumps({{"class": type(model).__name__, "module": type(model).__module__}}))
        """
    )
    result = run_in_python_without_package(script, cwd=folder)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["logits"] = load_file(str(out_file))["logits"]
    return report


def checkpointing_runs(build, loss_of, inner) -> list[tuple[dict[str, torch.Tensor], int]]:
    """Train-mode gradients of ``loss_of(model)`` for ``build()`` without and with activation checkpointing,
    each with the number of times the module ``inner(model)`` ran (a recomputed module runs twice).

    ``build`` must seed itself; the same seed is set before each forward, so dropout draws agree."""
    runs = []
    for checkpointing in (False, True):
        model = build().train()
        if checkpointing:
            model.activation_checkpointing_enable()
        calls, module = [], inner(model)
        forward = module.forward  # counted by wrapping: forward hooks do not run in checkpoint's recomputation

        def counted(*args, forward=forward, calls=calls, **kwargs):
            calls.append(1)
            return forward(*args, **kwargs)

        module.forward = counted
        torch.manual_seed(1)
        loss_of(model).backward()
        runs.append(({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, len(calls)))
    return runs
