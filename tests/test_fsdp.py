"""Sharded training (FSDP2) through the engine on 2 CPU processes: exact resume, checkpoint layout, refusals.

The 2-process runs equal 1-process runs in the ``test_two_cpu_processes_match_one_process`` tests of the
LM, seq2seq and BERT training tests (each run under DDP and under FSDP)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch
from accelerate.utils import DistributedType
from distributed_utils import assert_same_weights, run_and_resume_from_step_3
from transformers import AutoModelForCausalLM

from hf_seqmodels.training.core import checkpointing
from hf_seqmodels.training.core.launch import shard_on_cpu
from hf_seqmodels.training.core.loop import TrainingLoop


@pytest.mark.slow
def test_a_sharded_run_resumed_from_its_checkpoint_ends_with_the_uninterrupted_weights(tmp_path):
    """A Transformer LM with dropout (so the RNG states matter) and AdamW, 6 updates on 2 FSDP processes; a
    second run starts from a copy of the first one's checkpoint-3 (as after a crash there) and must end
    with exactly the same weights. The checkpoint has the layout of an unsharded run."""
    full, crashed, _ = run_and_resume_from_step_3(tmp_path, fsdp=True)
    checkpoint = full / "checkpoint-3"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["sharded"] is True and state["num_processes"] == 2 and state["global_step"] == 3
    # the whole model in the layout of an unsharded run, and the whole optimizer state keyed by name
    model = AutoModelForCausalLM.from_pretrained(full)
    safetensors.torch.load_model(model, str(checkpoint / checkpointing.MODEL_FILE), strict=True)
    optimizer_state = torch.load(checkpoint / checkpointing.OPTIMIZER_FILE, weights_only=True)
    names = {name for name, _ in model.named_parameters()}
    assert set(optimizer_state["state"]) == names
    embeddings = "model.embeddings.embed_tokens.weight"  # tied to lm_head.weight: one parameter
    assert {tuple(v.shape) for v in optimizer_state["state"][embeddings].values() if v.dim()} == \
        {tuple(model.lm_head.weight.shape)}  # Adam's moments of the whole matrix, not of a shard
    expected = assert_same_weights(full, crashed)
    assert not torch.equal(expected[embeddings], model.lm_head.weight.detach())  # updates 4-6 changed it


def test_a_checkpoint_resumes_only_under_the_kind_of_run_that_wrote_it(tmp_path):
    folder = tmp_path / "checkpoint-1"
    folder.mkdir()
    state = checkpointing.TrainerState(global_step=1, num_processes=1, sharded=True)
    (folder / checkpointing.STATE_FILE).write_text(state.to_json())
    accelerator = SimpleNamespace(num_processes=1)
    with pytest.raises(ValueError, match=r"written by a sharded \(FSDP\) run and this run is unsharded"):
        checkpointing.load_checkpoint(folder, accelerator=accelerator, model=None, optimizer=None, scheduler=None)


def test_fsdp1_on_cpu_processes_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("FSDP_VERSION", "1")
    with pytest.raises(ValueError, match=r"`fsdp_version`=.?1.?: expected 2 on CPU processes"):
        shard_on_cpu(SimpleNamespace())


def test_the_engine_refuses_fsdp1():
    accelerator = SimpleNamespace(distributed_type=DistributedType.FSDP, state=SimpleNamespace(
        fsdp_plugin=SimpleNamespace(fsdp_version=1)))
    with pytest.raises(NotImplementedError, match="FSDP2 only.*fsdp_version: 2"):
        TrainingLoop(None, None, None, accelerator)
