"""DeepSpeed ZeRO-2 through the engine on 2 CPU processes (gloo): exact resume from its checkpoints and clear
refusals (the same updates as one plain process: tests/test_gradient_accumulation.py). The runs are
skipped where DeepSpeed is not installed."""

from __future__ import annotations

import logging

import pytest
import torch
from accelerate import PartialState
from distributed_utils import assert_same_weights, run_and_resume_from_step_3, weights

from hf_seqmodels.training.core import checkpointing
from hf_seqmodels.training.core.arguments import EngineArguments
from hf_seqmodels.training.core.launch import configure_deepspeed


@pytest.mark.slow
def test_a_deepspeed_run_resumed_from_its_checkpoint_ends_with_the_uninterrupted_weights(tmp_path):
    """A Transformer LM with dropout (the RNG states matter) and AdamW, 6 updates on 2 ZeRO-2 processes; a
    second run starts from a copy of the first one's checkpoint-3 and must end with the same weights."""
    pytest.importorskip("deepspeed")
    full, crashed, _ = run_and_resume_from_step_3(tmp_path, deepspeed=True)
    expected = assert_same_weights(full, crashed)
    three = weights(full / "checkpoint-3")
    assert any(not torch.equal(three[name], expected[name]) for name in three.keys() & expected.keys())  # 4-6 did update


def test_a_deepspeed_checkpoint_resumes_only_under_deepspeed(tmp_path):
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    state = checkpointing.TrainerState(global_step=1, num_processes=1, deepspeed=True)
    (folder / checkpointing.STATE_FILE).write_text(state.to_json())
    accelerator = type("Accelerator", (), {"num_processes": 1})()
    with pytest.raises(ValueError, match=r"written by a DeepSpeed \(ZeRO\) run and this run is unsharded"):
        checkpointing.load_checkpoint(folder, accelerator=accelerator, model=None, optimizer=None, scheduler=None)


def test_the_deepspeed_configuration_follows_the_run_and_zero3_is_refused(tmp_path, caplog):
    PartialState(cpu=True)  # accelerate's logger needs it (the training scripts have made their Accelerator)
    args = EngineArguments(output_dir=str(tmp_path), gradient_accumulation_steps=3, max_grad_norm=1.0)
    args.per_device_train_batch_size = 4
    config = {"zero_optimization": {"stage": 2}, "gradient_clipping": 5.0}
    with caplog.at_level(logging.WARNING):
        configure_deepspeed(config, args, num_processes=2)
    assert "gradient_clipping=5.0 is replaced by --max_grad_norm=1.0" in caplog.text
    assert config["gradient_clipping"] == 1.0 and config["gradient_accumulation_steps"] == 3
    assert config["train_micro_batch_size_per_gpu"] == 4 and config["train_batch_size"] == 24
    with pytest.raises(ValueError, match=r"`zero_stage`=3.*0, 1 or 2"):
        configure_deepspeed({"zero_optimization": {"stage": 3}}, args, num_processes=2)
