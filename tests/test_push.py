"""``hf-seqmodels push`` / :func:`hf_seqmodels.publishing.push_folder_to_hub`: validation, the allow-list, dry runs, tokens."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import struct
import zlib
from pathlib import Path

import huggingface_hub
import pytest
import torch
from tokenizer_test_utils import char_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_seqmodels import RNNConfig, RNNForCausalLM, TransformerConfig, TransformerForConditionalGeneration
from hf_seqmodels.cards import save_for_hub
from hf_seqmodels.cli import main as cli_main
from hf_seqmodels.publishing import PushError, files_to_push, push_folder_to_hub

SECRET = "hf_SeCrEtToKeN0123456789abcdefghij"
TOKENIZER_FILES = {"tokenizer.json", "tokenizer_config.json"}


def tiny_png() -> bytes:
    """A valid 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def saved_folder(tmp_path_factory) -> Path:
    """A tiny RNN LM saved with ``save_for_hub`` plus what a training run leaves next to it."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "loss_curve.png").write_bytes(tiny_png())  # shown by the card
    (folder / "unused.png").write_bytes(tiny_png())  # not shown: stays local
    tokenizer = char_tokenizer("abc ", bos_template=False)
    torch.manual_seed(0)
    config = RNNConfig.from_preset("tiny", vocab_size=len(tokenizer), cell_type="gru", hidden_size=8, embedding_size=8,
                                   num_hidden_layers=1, pad_token_id=0, bos_token_id=2, eos_token_id=3)
    save_for_hub(folder, RNNForCausalLM(config), tokenizer)
    checkpoint = folder / "checkpoint-1"
    checkpoint.mkdir()
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "rank-0.pt"):
        (checkpoint / name).write_bytes(b"not for upload")
    (folder / "training_history.json").write_text(json.dumps([{"step": 1, "train_loss": 2.0}]))
    (folder / "tmp-checkpoint-2").mkdir()
    (folder / "notes.txt").write_text("local notes")
    return folder


def expected_files(folder: Path) -> set[str]:
    code = {p.name for p in folder.glob("*.py")}
    assert {"configuration_rnn.py", "modeling_rnn.py"} <= code
    return {"config.json", "generation_config.json", "model.safetensors", "README.md", "loss_curve.png",
            *TOKENIZER_FILES, *code}


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(folder, target)
    return target


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a dry run must not use the network")
    for name in ("create_repo", "upload_folder", "create_commit", "whoami"):
        monkeypatch.setattr(huggingface_hub.HfApi, name, refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_dry_run_writes_exactly_the_allow_listed_files_and_loads(saved_folder, tmp_path, no_network, capsys, caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "dry"
    code = cli_main(["push", str(saved_folder), "user/tiny-gru", "--dry-run", "--dry_run_dir", str(out),
                     "--token", SECRET])
    assert code == 0
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == expected_files(saved_folder) == set(files_to_push(saved_folder))
    printed = capsys.readouterr()
    for name in written:
        assert name in printed.out
    assert f"{(out / 'model.safetensors').stat().st_size:,}" in printed.out
    # the token is never written or logged
    assert SECRET not in printed.out + printed.err + caplog.text
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True)
    assert type(model).__name__ == "RNNForCausalLM" and model.config.cell_type == "gru"
    assert len(AutoTokenizer.from_pretrained(out)) == 8


def test_dry_run_defaults_to_a_temporary_folder(saved_folder, no_network):
    target = Path(push_folder_to_hub(saved_folder, "user/tiny-gru", dry_run=True))
    try:
        assert {p.name for p in target.iterdir()} == expected_files(saved_folder)
    finally:
        shutil.rmtree(target)


def test_push_creates_the_repo_and_uploads_the_allow_listed_files(saved_folder, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)
        calls["token"] = self.token
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, *, folder_path, repo_id, allow_patterns=None, **kwargs):
        uploaded = {p.relative_to(folder_path).as_posix() for p in Path(folder_path).rglob("*") if p.is_file()}
        calls["upload_folder"] = (repo_id, uploaded, set(allow_patterns), kwargs)
        return huggingface_hub.CommitInfo(commit_url=f"https://huggingface.co/{repo_id}/commit/abc",
                                          commit_message="m", commit_description="", oid="abc")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    assert cli_main(["push", str(saved_folder), "user/tiny-gru", "--private", "--token", SECRET]) == 0
    assert calls["create_repo"] == ("user/tiny-gru", {"private": True, "exist_ok": True, "repo_type": "model"})
    assert calls["token"] == SECRET
    repo_id, uploaded, allowed, kwargs = calls["upload_folder"]
    assert repo_id == "user/tiny-gru" and kwargs["repo_type"] == "model"
    assert uploaded == allowed == expected_files(saved_folder)
    printed = capsys.readouterr()
    assert "https://huggingface.co/user/tiny-gru/commit/abc" in printed.out
    assert SECRET not in printed.out + printed.err + caplog.text


def test_without_a_token_huggingface_hub_finds_it(saved_folder, monkeypatch):
    seen = {}
    monkeypatch.setenv("HF_TOKEN", SECRET)

    def create_repo(self, repo_id, **kwargs):
        seen["token"] = self.token
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", lambda self, **kw: "done")
    push_folder_to_hub(saved_folder, "user/tiny-gru")
    assert seen["token"] is None  # HfApi(token=None) reads HF_TOKEN / the stored login itself


@pytest.mark.parametrize("breakage, message", [
    (lambda f: (f / "config.json").unlink(), "no config.json"),
    (lambda f: (f / "model.safetensors").unlink(), "no model.safetensors"),
    (lambda f: (f / "README.md").unlink(), "no README.md"),
    (lambda f: (f / "modeling_rnn.py").unlink(), "no modeling_rnn.py"),
    (lambda f: (f / "config.json").write_text(json.dumps(
        {k: v for k, v in json.loads((f / "config.json").read_text()).items() if k != "auto_map"})), "no auto_map"),
    (lambda f: (f / "pytorch_model.bin").write_bytes(b"x"), r"pickle-format files \['pytorch_model.bin'\]"),
    (lambda f: (f / "README.md").write_text("---\nlicense: [unclosed\n---\n\n# card\n"), "does not parse"),
    (lambda f: (f / "README.md").write_text("# a card without metadata\n"), "no YAML metadata header"),
    (lambda f: (f / "README.md").write_text("---\nlibrary_name: transformers\n---\n\n# card\n"), "`license`"),
    (lambda f: (f / "loss_curve.png").unlink(), "shows 'loss_curve.png'"),
])
def test_invalid_folders_are_refused_naming_the_problem(saved_folder, tmp_path, breakage, message, no_network):
    folder = copy_of(saved_folder, tmp_path)
    breakage(folder)
    with pytest.raises(PushError, match=message):
        push_folder_to_hub(folder, "user/x", dry_run=True, dry_run_dir=tmp_path / "dry")
    assert not (tmp_path / "dry").exists()


def test_cli_reports_an_invalid_folder(tmp_path, capsys, no_network):
    assert cli_main(["push", str(tmp_path), "user/x", "--dry-run"]) == 1
    assert "no config.json" in capsys.readouterr().err


def test_dry_run_refuses_a_non_empty_target(saved_folder, tmp_path, no_network):
    (tmp_path / "dry").mkdir()
    (tmp_path / "dry" / "old.txt").write_text("x")
    with pytest.raises(PushError, match="not empty"):
        push_folder_to_hub(saved_folder, "user/x", dry_run=True, dry_run_dir=tmp_path / "dry")


def test_nested_code_checkpoints_and_outward_links_are_never_chosen(saved_folder, tmp_path, no_network):
    folder = copy_of(saved_folder, tmp_path)
    for nested in ("checkpoint-1", "runs/old/checkpoint-7", "source_tokenizer/extra"):
        (folder / nested).mkdir(parents=True, exist_ok=True)
        (folder / nested / "modeling_rnn.py").write_text("raise SystemExit('not ours')\n")
        (folder / nested / "config.json").write_text("{}")
    secret = tmp_path / "outside.txt"
    secret.write_text("private")
    (folder / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    assert set(files_to_push(folder)) == expected_files(saved_folder)
    out = tmp_path / "dry"
    assert cli_main(["push", str(folder), "user/tiny-gru", "--dry_run", "--dry_run_dir", str(out)]) == 0
    assert {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} == expected_files(saved_folder)

    (folder / "vocab.txt").symlink_to(secret)  # an allow-listed name that points out of the folder
    with pytest.raises(PushError, match=r"vocab\.txt is a link to a file outside"):
        files_to_push(folder)
    (folder / "vocab.txt").unlink()
    (folder / "vocab.txt").symlink_to(folder / "notes.txt")  # a link that stays inside is a plain file
    assert "vocab.txt" in files_to_push(folder)


def test_a_pipeline_named_by_the_config_but_missing_is_refused(tmp_path, no_network):
    folder = tmp_path / "seq2seq"
    config = TransformerConfig.from_preset("tiny")
    save_for_hub(folder, TransformerForConditionalGeneration(config))
    assert "hfsm-translation" in json.loads((folder / "config.json").read_text())["custom_pipelines"]
    assert "pipelines.py" in files_to_push(folder)
    (folder / "pipelines.py").unlink()  # e.g. a folder copied without it
    with pytest.raises(PushError, match=r"has no pipelines\.py, which config\.json's custom_pipelines names"):
        files_to_push(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "custom_pipelines": ["hfsm-translation"]}))
    with pytest.raises(PushError, match=r"custom_pipelines=\['hfsm-translation'\]; expected a dict of entries keyed by"):
        files_to_push(folder)
