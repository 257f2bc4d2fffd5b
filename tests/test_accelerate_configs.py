"""The accelerate configuration files of ``training/configs``: they parse, and the CPU one trains on 2 processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.utils import DistributedType
from distributed_utils import launch_two_cpu_processes

from hf_seqmodels.registry import FAMILIES

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "training" / "configs"
CORPUS = "the cat sat on the mat. the dog sat on the log.\n" * 40


@pytest.mark.parametrize("name, distributed_type, num_processes", [
    ("single_gpu", DistributedType.NO, 1),
    ("multi_gpu_ddp", DistributedType.MULTI_GPU, 4),
    ("fsdp", DistributedType.FSDP, 4),
    ("deepspeed_zero2", DistributedType.DEEPSPEED, 4),
    ("cpu_2proc", DistributedType.MULTI_GPU, 2),
    ("fsdp_cpu_2proc", DistributedType.FSDP, 2),
    ("deepspeed_cpu_2proc", DistributedType.DEEPSPEED, 2),
])
def test_config_files_parse(name, distributed_type, num_processes):
    config = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type == distributed_type and config.num_processes == num_processes
    assert (config.num_machines, config.machine_rank, config.mixed_precision) == (1, 0, "no")
    # DeepSpeed on CPU processes must not set use_cpu: accelerate would drop DeepSpeed for DDP
    assert config.use_cpu == (name.endswith("cpu_2proc") and not name.startswith("deepspeed"))


def test_fsdp_and_deepspeed_settings():
    for name in ("fsdp", "fsdp_cpu_2proc"):  # the same sharding on GPUs and on CPU processes
        fsdp = load_config_from_file(str(CONFIGS / f"{name}.yaml")).fsdp_config
        assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_reshard_after_forward"] is True  # the engine: FSDP2 only
        assert fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
        assert "fsdp_transformer_layer_cls_to_wrap" not in fsdp  # the model's _no_split_modules decide
        assert fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    for name in ("deepspeed_zero2", "deepspeed_cpu_2proc"):
        deepspeed = load_config_from_file(str(CONFIGS / f"{name}.yaml")).deepspeed_config
        assert deepspeed["zero_stage"] == 2 and deepspeed["gradient_accumulation_steps"] == 1


@pytest.mark.parametrize("head", [cls for heads in FAMILIES.values() for cls in heads.values()],
                         ids=lambda cls: cls.__name__)
def test_every_module_class_fsdp_wraps_is_in_the_head(head):
    """TRANSFORMER_BASED_WRAP without a class list wraps the head's ``_no_split_modules``; accelerate fails
    with "Could not find the transformer layer class" if one of them is not in the model."""
    config_class = next(c for c, heads in FAMILIES.items() if head in heads.values())
    config = config_class.from_preset("tiny")
    if head.__name__ == "BiLSTMCRFForTokenClassification":
        config.id2label = {0: "O", 1: "B-X", 2: "I-X"}
        config.label2id = {v: k for k, v in config.id2label.items()}
    model = head(config)
    present = {type(module).__name__ for module in model.modules()}
    declared = head._no_split_modules or []
    assert [name for name in declared if name not in present] == []
    # accelerate's FSDP2 gives the embeddings a unit of their own: a wrapped class must not hold them
    embeddings = {id(m) for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None}
    for module in model.modules():
        if type(module).__name__ in declared:
            assert not embeddings & {id(m) for m in module.modules()}, type(module).__name__
    if head.__name__.startswith(("Transformer", "Bert", "RNN")):
        assert declared, f"{head.__name__} has layers but declares none for FSDP to wrap"


@pytest.mark.slow
def test_cpu_2proc_config_trains_on_two_processes(tmp_path):
    train_file = tmp_path / "corpus.txt"
    train_file.write_text(CORPUS, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["--train_file", str(train_file), "--tokenizer_kind", "char",
            "--min_frequency", "1", "--model_family", "rnn", "--preset", "tiny",
            "--config_overrides", "cell_type=gru,hidden_size=8", "--per_device_train_batch_size", "2",
            "--block_size", "16", "--max_steps", "4", "--no_plot", "--disable_tqdm", "--output_dir", str(out),
            "--use_cpu"]  # Accelerator(cpu=True) in the workers: the multi-GPU launcher does not pass use_cpu on
    # the file's own port 29500 may be taken by another run: the helper passes a free one
    done = launch_two_cpu_processes("train_lm.py", argv, ["--config_file", str(CONFIGS / "cpu_2proc.yaml")])
    assert "global_train_batch_size': 4" in done.stderr
    assert "[RANK 0]" in done.stderr
    assert (out / "checkpoint-4").is_dir()
    assert safetensors.torch.load_file(str(out / "model.safetensors"))
