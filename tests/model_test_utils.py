"""Helpers shared by the model tests: tiny inputs, fresh-Python remote-code loading."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from safetensors.torch import load_file

# A Python in which `import hf_seqmodels` fails, as on a machine that does not have our package.
_BLOCK_PACKAGE = "import sys; sys.modules['hf_seqmodels'] = None\n"


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
    """Load ``folder`` with ``auto_class.from_pretrained(..., trust_remote_code=True)`` in a fresh Python
    where ``hf_seqmodels`` cannot be imported; save its logits to ``out_file`` and return its report."""
    script = _BLOCK_PACKAGE + textwrap.dedent(
        f"""
        import json, torch, transformers
        from safetensors.torch import save_file
        try:
            import hf_seqmodels  # noqa: F401
            raise SystemExit("hf_seqmodels should not be importable here")
        except ImportError:
            pass
        model = getattr(transformers, {auto_class!r}).from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        ids = torch.tensor({input_ids.tolist()!r})
        with torch.no_grad():
            logits = model(ids).logits
        save_file({{"logits": logits.contiguous()}}, {str(out_file)!r})
        print(json.dumps({{"class": type(model).__name__, "module": type(model).__module__}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=folder, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["logits"] = load_file(str(out_file))["logits"]
    return report
