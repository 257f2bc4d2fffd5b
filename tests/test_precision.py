"""A preset's recipe turns bf16 on only where the device runs it faster than fp32 (a CUDA GPU with bf16, a CPU with
AVX512-BF16 or AMX); elsewhere the run trains in fp32 and says so in one line, and an explicit --bf16 still forces
it. The device is faked: the CPU through the cpuinfo file it is read from, the GPU through torch.cuda."""

from __future__ import annotations

import logging

import pytest
import torch

from hf_seqmodels.training.bert.cli import parse_arguments as bert_arguments
from hf_seqmodels.training.core import precision
from hf_seqmodels.training.lm.cli import parse_arguments as lm_arguments
from hf_seqmodels.training.seq2seq.cli import parse_arguments as seq2seq_arguments

#: the flags of a CPU without bf16 units (an AMD EPYC without AVX-512)
PLAIN = "fpu sse sse2 avx avx2 fma"


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    """``cpu(flags)`` makes the run's device a CPU (no GPU) whose /proc/cpuinfo lists ``flags``."""
    def fake(flags: str) -> None:
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {flags}\n\n"
                           f"processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {flags}\n")
        monkeypatch.setattr(precision, "CPUINFO", cpuinfo)
        monkeypatch.setattr(precision.sys, "platform", "linux")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return fake


@pytest.fixture
def gpu(monkeypatch):
    """``gpu(bf16)`` makes the run's device a CUDA GPU that does (or does not) support bf16."""
    def fake(bf16: bool) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "NVIDIA H200")
    return fake


@pytest.fixture
def out(tmp_path, monkeypatch) -> str:
    """An output folder, with a one-line text file ``t.txt`` and a one-pair ``t.tsv`` in the working folder."""
    (tmp_path / "t.txt").write_text("a b\n")
    (tmp_path / "t.tsv").write_text("a b\tc d\n")
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "out")


@pytest.fixture
def preset_arguments(out):
    """``preset_arguments(*flags)``: the training arguments of the Transformer LM's nanogpt-cpu preset (a recipe
    with bf16=True and torch_compile=True) as the LM script resolves them, with ``flags`` on the command line."""
    base = ["--output_dir", out, "--train_file", "t.txt", "--model_family", "transformer_lm", "--preset", "nanogpt-cpu"]
    return lambda *flags: lm_arguments([*base, *flags])[2]


@pytest.fixture
def preset_bf16(preset_arguments):
    """``preset_bf16(*flags)``: ``bf16`` of :func:`preset_arguments`."""
    return lambda *flags: preset_arguments(*flags).bf16


def off_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "The recipe's bf16 is off" in r.getMessage()]


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16", "amx_tile"])
def test_a_cpu_with_avx512_bf16_or_amx_keeps_the_recipe_s_bf16(cpu, preset_bf16, caplog, flag):
    cpu(f"{PLAIN} avx512f {flag}")
    with caplog.at_level(logging.INFO):
        assert preset_bf16() is True
    assert off_lines(caplog) == []


def test_a_cpu_without_them_trains_in_fp32_and_says_so_in_one_line(cpu, preset_bf16, caplog):
    cpu(f"{PLAIN} avx512f avx512_vnni")  # AVX-512 alone is not enough
    with caplog.at_level(logging.INFO):
        assert preset_bf16() is False
    assert off_lines(caplog) == ["The recipe's bf16 is off: this CPU (AMD EPYC 7B13) has no AVX512-BF16 or AMX, "
                                 "where bf16 runs slower than fp32; pass --bf16 true to force it."]


def test_an_explicit_bf16_is_kept_on_a_cpu_without_them_and_says_nothing(cpu, preset_bf16, caplog):
    cpu(PLAIN)
    with caplog.at_level(logging.INFO):
        assert preset_bf16("--bf16", "true") is True
        assert preset_bf16("--bf16") is True  # a bare flag means True
        assert preset_bf16("--bf16", "False") is False
    assert off_lines(caplog) == []


def test_use_cpu_decides_on_the_cpu_even_with_a_gpu(gpu, cpu, preset_bf16):
    cpu(PLAIN)
    gpu(True)
    assert preset_bf16() is True
    assert preset_bf16("--use_cpu", "True") is False


def test_a_gpu_with_bf16_keeps_the_recipe_s_bf16_and_one_without_turns_it_off(gpu, preset_bf16, caplog):
    gpu(True)
    assert preset_bf16() is True
    gpu(False)
    with caplog.at_level(logging.INFO):
        assert preset_bf16() is False
        assert preset_bf16("--bf16", "true") is True
    assert off_lines(caplog) == ["The recipe's bf16 is off: this GPU (NVIDIA H200) has no bf16 support, where bf16 "
                                 "runs slower than fp32; pass --bf16 true to force it."]


def test_the_seq2seq_and_bert_presets_follow_the_cpu_too(cpu, out):
    for flags, expected in ((PLAIN, False), (f"{PLAIN} amx_bf16 amx_tile", True)):
        cpu(flags)
        assert seq2seq_arguments(["--output_dir", out, "--train_file", "t.tsv", "--model_family", "transformer",
                                  "--preset", "transformer-base"])[2].bf16 is expected
        assert bert_arguments(["--output_dir", out, "--train_file", "t.txt", "--preset", "bert-mini"])[2].bf16 \
            is expected


def test_without_proc_cpuinfo_a_cpu_is_taken_to_be_slow(monkeypatch, tmp_path):
    monkeypatch.setattr(precision.sys, "platform", "darwin")
    assert precision.bf16_is_fast("cpu")[0] is False


@pytest.fixture
def preset_compile(preset_arguments):
    """``preset_compile(*flags)``: ``torch_compile`` of :func:`preset_arguments`."""
    return lambda *flags: preset_arguments(*flags).torch_compile


def compile_off_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "The recipe's torch_compile is off" in r.getMessage()]


def test_a_recipe_compiles_on_a_gpu_only_and_an_explicit_torch_compile_anywhere(gpu, cpu, preset_compile, caplog):
    gpu(True)
    assert preset_compile() is True
    assert preset_compile("--torch_compile", "false") is False
    cpu(f"{PLAIN} amx_bf16 amx_tile")  # even a CPU that runs the recipe's bf16
    with caplog.at_level(logging.INFO):
        assert preset_compile() is False
        assert preset_compile("--torch_compile") is True  # a bare flag means True
    assert compile_off_lines(caplog) == ["The recipe's torch_compile is off: on a CPU compiling costs more time than "
                                         "it saves; pass --torch_compile true to force it."]


def test_the_transformer_and_bert_presets_compile_on_a_gpu_and_the_recurrent_ones_do_not(gpu, out):
    gpu(True)
    assert seq2seq_arguments(["--output_dir", out, "--train_file", "t.tsv", "--model_family", "transformer",
                              "--preset", "transformer-base"])[2].torch_compile is True
    assert bert_arguments(["--output_dir", out, "--train_file", "t.txt", "--preset", "bert-mini"])[2].torch_compile
    assert lm_arguments(["--output_dir", out, "--train_file", "t.txt", "--model_family", "transformer_lm",
                         "--preset", "gpt-1"])[2].torch_compile is True
    assert lm_arguments(["--output_dir", out, "--train_file", "t.txt", "--model_family", "rnn",
                         "--preset", "zaremba-medium"])[2].torch_compile is False


def test_tf32_is_on_for_a_gpu_unless_turned_off_and_refused_on_a_cpu(monkeypatch, caplog):
    chosen = []
    monkeypatch.setattr(torch, "set_float32_matmul_precision", chosen.append)
    with caplog.at_level(logging.INFO):
        precision.configure_tf32(None, "cuda")
        precision.configure_tf32(True, "cuda")
        precision.configure_tf32(False, "cuda")
        precision.configure_tf32(None, "cpu")
        precision.configure_tf32(False, "cpu")
    assert chosen == ["high", "high", "highest"]  # a CPU run leaves torch's setting alone
    assert "float32 matrix products use TF32 tensor cores (--tf32 false: full float32)" in caplog.text
    with pytest.raises(ValueError, match="tf32"):
        precision.configure_tf32(True, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tf32_is_what_inductor_reads_on_a_gpu():
    """Setting TF32 through torch.backends.cuda.matmul.fp32_precision alone would make this getter raise."""
    before = torch.get_float32_matmul_precision()
    try:
        precision.configure_tf32(None, "cuda")
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_recipe_s_bf16_weights_apply_on_a_gpu_with_the_run_s_bf16_only(gpu, cpu, preset_arguments):
    gpu(True)
    assert preset_arguments().bf16_weights is True
    assert preset_arguments("--bf16", "false").bf16_weights is False  # bf16 weights need bf16 autocast
    assert preset_arguments("--bf16_weights", "false").bf16_weights is False
    gpu(False)  # the recipe's bf16 is off on a GPU without bf16, and its bf16 weights with it
    assert preset_arguments().bf16_weights is False
    cpu(f"{PLAIN} avx512_bf16")  # a CPU that runs the recipe's bf16: the bf16 weights are explicit there
    assert (preset_arguments().bf16, preset_arguments().bf16_weights) == (True, False)
    assert preset_arguments("--bf16_weights").bf16_weights is True
