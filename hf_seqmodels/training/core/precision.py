"""Whether bf16 autocast and ``torch.compile`` pay on the device a run trains on, which decides whether a recipe's
``bf16`` and ``torch_compile`` apply.

bf16 autocast makes a step faster only where the device has bf16 units: a CUDA GPU that supports bf16, or a CPU
with AVX512-BF16 or AMX kernels. Elsewhere it is slower than fp32, by far on some CPUs (a Transformer LM 4 x 256
step takes 11.4 times the fp32 time on an AMD EPYC without AVX-512, 1.2 to 1.6 times on an Intel Xeon without
AMX), so a preset's recipe that turns bf16 on trains in fp32 there; an explicit ``--bf16`` still forces it.

``torch.compile`` pays on a GPU, where it fuses the many small kernels a step launches (BERT-base on an H200:
a third less time per step). On a CPU the compilation (20 to 30 s for a tiny model, minutes for a large one)
costs more than a CPU run saves, so a recipe's ``torch_compile`` applies on CUDA only; an explicit
``--torch_compile`` compiles anywhere.

On a CUDA GPU the float32 matrix products (and the fp32 parts of a bf16 run) use TF32 tensor cores unless
``--tf32 false``: about 10 bits of mantissa in the products, float32 accumulation, several times the
throughput, as nanoGPT and transformers' ``--tf32`` do.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch

from ...models.config_utils import invalid

logger = logging.getLogger(__name__)

#: where Linux lists the CPU's model name and flags
CPUINFO = Path("/proc/cpuinfo")
#: the /proc/cpuinfo flags of the CPU kernels that make bf16 products faster than fp32 ones
FAST_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile")


def cpu_description() -> tuple[str, set[str]]:
    """``(model name, flags)`` of this CPU from the first processor of ``/proc/cpuinfo`` on Linux; elsewhere no
    flags are known, so bf16 is taken to be slow there."""
    name, flags = "", set()
    if sys.platform.startswith("linux") and CPUINFO.exists():
        for line in CPUINFO.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name:
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    return name or "unknown model", flags


def training_device(use_cpu: bool) -> str:
    """``"cuda"`` or ``"cpu"``: the device type the run's ``Accelerator`` will train on (``--use_cpu`` and
    ``accelerate launch --cpu``, which sets ``ACCELERATE_USE_CPU``, force the CPU)."""
    forced = use_cpu or os.environ.get("ACCELERATE_USE_CPU", "false").lower() in ("1", "true", "yes")
    return "cuda" if torch.cuda.is_available() and not forced else "cpu"


def bf16_is_fast(device: str) -> tuple[bool, str]:
    """Whether bf16 autocast runs faster than fp32 on ``device`` (``"cuda"`` or ``"cpu"``), and the device as the
    reason names it (e.g. ``"this CPU (AMD EPYC 7B13) has no AVX512-BF16 or AMX"``)."""
    if device == "cuda":
        name = torch.cuda.get_device_name()
        if torch.cuda.is_bf16_supported():
            return True, f"this GPU ({name}) supports bf16"
        return False, f"this GPU ({name}) has no bf16 support"
    name, flags = cpu_description()
    found = [flag for flag in FAST_BF16_CPU_FLAGS if flag in flags]
    if found:
        return True, f"this CPU ({name}) has {', '.join(found)}"
    return False, f"this CPU ({name}) has no AVX512-BF16 or AMX"


def recipe_bf16_applies(use_cpu: bool) -> bool:
    """Whether a recipe's ``bf16=True`` applies on the run's device; where it does not, say so in one line."""
    fast, reason = bf16_is_fast(training_device(use_cpu))
    if not fast:
        logger.warning(f"The recipe's bf16 is off: {reason}, where bf16 runs slower than fp32; "
                       "pass --bf16 true to force it.")
    return fast


def gpu_recipe_setting_applies(use_cpu: bool, name: str) -> bool:
    """Whether a recipe's GPU-only setting ``name`` (``torch_compile`` or ``bf16_weights``) applies on the run's
    device: on a GPU; where not, say so in one line."""
    if training_device(use_cpu) == "cuda":
        return True
    why = {"torch_compile": "compiling costs more time than it saves",
           "bf16_weights": "its gain is not measured"}[name]
    logger.info(f"The recipe's {name} is off: on a CPU {why}; pass --{name} true to force it.")
    return False


def configure_tf32(tf32: bool | None, device: str) -> None:
    """TF32 for the float32 matrix products of a run on ``device`` (``"cuda"`` or ``"cpu"``): on CUDA unless
    ``tf32`` is False, said in the log. ``torch.set_float32_matmul_precision`` rather than torch 2.9's
    ``torch.backends.cuda.matmul.fp32_precision``: setting only the latter makes
    ``torch.get_float32_matmul_precision()``, which inductor's autotuning reads, raise."""
    if device != "cuda":
        if tf32:
            raise invalid("tf32", True, "False or unset on a CPU (TF32 is a CUDA GPU's number format)")
        return
    torch.set_float32_matmul_precision("highest" if tf32 is False else "high")
    logger.info("float32 matrix products use TF32 tensor cores (--tf32 false: full float32)" if tf32 is not False
                else "float32 matrix products are full float32 (--tf32 false)")


__all__ = [
    "CPUINFO", "FAST_BF16_CPU_FLAGS", "bf16_is_fast", "configure_tf32", "cpu_description", "gpu_recipe_setting_applies",
    "recipe_bf16_applies", "training_device",
]
