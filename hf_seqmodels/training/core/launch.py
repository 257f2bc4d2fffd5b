"""The run's processes and devices: one ``Accelerator`` for a single process, DDP, FSDP2 (also on CPU processes)
or DeepSpeed ZeRO 0-2, as the ``accelerate launch`` configuration (``training/configs/``) asks."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from accelerate import Accelerator
from accelerate.logging import get_logger
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin, InitProcessGroupKwargs

from ...models.config_utils import invalid

if TYPE_CHECKING:
    from .arguments import EngineArguments

logger = get_logger(__name__)


def make_accelerator(args: EngineArguments) -> Accelerator:
    """The run's ``Accelerator`` (``ACCELERATE_USE_CPU=1``, set by ``accelerate launch --cpu``, also forces the CPU).

    ``report_to`` trackers write under ``output_dir/runs`` (TensorBoard: ``tensorboard --logdir
    output_dir/runs``)."""
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    handlers = []
    if deepspeed and not torch.cuda.is_available():
        # accelerate 1.15 connects DeepSpeed's processes only through an accelerator's backend (NCCL...): CPU
        # processes need gloo named. --use_cpu would make accelerate drop DeepSpeed for plain DDP.
        handlers.append(InitProcessGroupKwargs(backend="gloo"))
    elif deepspeed and args.use_cpu:
        raise invalid("use_cpu", True, "False under a DeepSpeed launch on GPUs (accelerate would train with DDP on "
                      "the CPU instead of DeepSpeed)")
    accelerator = Accelerator(cpu=args.use_cpu and not deepspeed, mixed_precision=args.mixed_precision,
                              log_with=args.trackers or None, project_dir=str(Path(args.output_dir) / "runs"),
                              kwargs_handlers=handlers)
    if args.mixed_precision == "fp16" and accelerator.device.type == "cpu":  # accelerate would silently run fp32
        raise invalid("fp16", True, "False on a CPU (fp16 autocast needs a GPU; --bf16 works on CPUs)")
    if args.mixed_precision == "bf16" and accelerator.device.type == "cpu" and accelerator.is_main_process:
        warn_if_bf16_is_slower()
    if (accelerator.distributed_type == DistributedType.MULTI_CPU
            and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"):
        shard_on_cpu(accelerator)
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        configure_deepspeed(accelerator.state.deepspeed_plugin.deepspeed_config, args, accelerator.num_processes)
    return accelerator


def cpu_matmul_speeds(size: int = 256, repeats: int = 3) -> dict[str, float]:
    """GFLOP/s of a ``size`` x ``size`` matrix product on this CPU with torch's threads, in float32 and in
    bfloat16 (the best of ``repeats`` after one warm-up each). The size keeps the measurement short where it
    matters, on a CPU without bf16 units: 0.3 s on a 2-core AMD EPYC without AVX-512, whose bfloat16 products run
    at under 1 GFLOP/s (1024 x 1024 took 14 s there), and still large enough for float32's kernels to run at speed."""
    speeds = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.ones(size, size, dtype=dtype), torch.ones(size, size, dtype=dtype)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
        speeds[str(dtype).removeprefix("torch.")] = 2 * size**3 / best / 1e9
    return speeds


def warn_if_bf16_is_slower(speeds: dict[str, float] | None = None) -> None:
    """bf16 autocast pays on a CPU only where its matrix products beat float32's (AVX512-BF16 or AMX kernels
    that outrun the float32 ones); where they do not, say so with the measured figures."""
    speeds = speeds or cpu_matmul_speeds()
    if speeds["bfloat16"] < speeds["float32"]:
        logger.warning(f"--bf16: on this CPU a bfloat16 matrix product runs at {speeds['bfloat16']:.0f} GFLOP/s "
                       f"against {speeds['float32']:.0f} GFLOP/s in float32 ({torch.get_num_threads()} threads), so "
                       f"bf16 autocast will likely make training slower here; --bf16 False trains in float32.")


def configure_deepspeed(config: dict[str, Any], args: EngineArguments, num_processes: int) -> None:
    """Make the DeepSpeed configuration of the launch agree with the run's flags (in place).

    The engine builds its own optimizer and schedule and feeds DeepSpeed batches it made itself, so
    DeepSpeed learns the batch sizes from here: ``per_device_train_batch_size`` (1 for token-count batches;
    DeepSpeed only checks and reports it), ``gradient_accumulation_steps`` (the engine marks the last batch
    of each update) and the clipping norm ``max_grad_norm`` (DeepSpeed clips; a different
    ``gradient_clipping`` in the configuration file is overridden with a warning). ZeRO stages 0-2 keep
    whole parameters on every process, which evaluation and saving use; stage 3 is refused."""
    stage = config.get("zero_optimization", {}).get("stage", 0)
    if stage not in (0, 1, 2):
        raise invalid("zero_stage", stage, "0, 1 or 2 (ZeRO-3 partitions the parameters, which the engine's "
                      "evaluation and saving do not gather; training/configs/fsdp.yaml shards them)")
    clipping = 0.0 if args.max_grad_norm is None else float(args.max_grad_norm)
    if config.get("gradient_clipping", "auto") not in ("auto", clipping):
        logger.warning(f"The DeepSpeed configuration's gradient_clipping={config['gradient_clipping']} is replaced "
                       f"by --max_grad_norm={args.max_grad_norm}.")
    micro_batch = getattr(args, "per_device_train_batch_size", None) or 1
    config.update(gradient_clipping=clipping, gradient_accumulation_steps=args.gradient_accumulation_steps,
                  train_micro_batch_size_per_gpu=micro_batch,
                  train_batch_size=micro_batch * args.gradient_accumulation_steps * num_processes)


def shard_on_cpu(accelerator: Accelerator) -> None:
    """Train with FSDP2 on CPU processes (gloo), as the launch's FSDP configuration asks.

    torch's FSDP2 (``fully_shard``) runs on CPU, but accelerate 1.15 chooses FSDP only for accelerator
    devices and falls back to DDP on CPU (see ``training/configs/fsdp_cpu_2proc.yaml``). This builds the
    FSDP plugin from the launcher's ``FSDP_*`` variables and selects it, so that ``prepare`` shards the
    model; FSDP1 needs a GPU and is refused."""
    version = os.environ.get("FSDP_VERSION", "1")
    if version != "2":
        raise invalid("fsdp_version", version, "2 on CPU processes (FSDP1 needs GPUs; set fsdp_version: 2)")
    plugin = FullyShardedDataParallelPlugin()
    if accelerator.mixed_precision != "no":
        plugin.set_mixed_precision(accelerator.mixed_precision)
    accelerator.state.distributed_type = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin


__all__ = ["configure_deepspeed", "cpu_matmul_speeds", "make_accelerator", "shard_on_cpu", "warn_if_bf16_is_slower"]
