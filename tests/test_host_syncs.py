"""The training loop reads nothing back from the device during an update (nanoGPT's rule): the update's loss stays
on the device until a logging step, a checkpoint or the end of the run, and the tokens are counted on the CPU.

On a GPU every ``.item()``, ``float()``, ``int()``, ``bool()`` or ``.tolist()`` of a device tensor makes the host
wait for the device to finish all it was given, so the host cannot queue the next update while the device runs
this one. On the CPU a host read cannot be told from a device one, so the tests count every such call made while
``TrainingLoop.train_epoch`` runs a short run whose logging, evaluation and checkpoint steps all fall after it.
Two things are left out, each for a reason: making the batches (on the CPU, before they go to the device) and the
optimizer's step (torch keeps a non-capturable Adam's step counts on the host). The model's forward is left out
where the models check their inputs' values themselves (on the CPU, where a read costs no wait); off the CPU the
loop vouches for its batches and the forward reads nothing either, which the last tests check on the CPU by
giving it the loop's GPU setting. With CUDA the same runs also go under ``torch.cuda.set_sync_debug_mode("error")``,
which raises at any synchronisation.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from model_inputs import model_inputs
from test_training_bert import text_corpus
from test_training_lm import CORPUS, char_tokenizer, engine_args, tiny_lstm, tiny_transformer_lm

from hf_seqmodels import BertConfig, BertForPreTraining
from hf_seqmodels.models.input_checks import inputs_checked_by_caller
from hf_seqmodels.registry import FAMILY_DESCRIPTIONS
from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training import train_causal_lm
from hf_seqmodels.training.bert.data import (
    SpecialIds,
    create_pretraining_examples,
    split_documents,
    tokenize_documents,
)
from hf_seqmodels.training.bert.trainer import BertPretrainingArguments, pretrain_bert
from hf_seqmodels.training.core import loop as loop_module
from hf_seqmodels.training.core.loop import TrainingLoop
from hf_seqmodels.training.core.text import tokenize_texts

#: the tensor methods that read values back to the host
READS = ("item", "__float__", "__int__", "__bool__", "tolist")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]
STEPS = 6


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


class HostReads:
    """The calls of :data:`READS` made while ``TrainingLoop.train_epoch`` runs, outside what the module docstring
    leaves out: ``calls`` (method and line); ``skipped`` counts those of the parts left out."""

    def __init__(self, monkeypatch, cuda: bool):
        self.calls: list[str] = []
        self.skipped = 0
        self.watching = self.counting = False
        self.cuda = cuda
        for name in READS:
            monkeypatch.setattr(torch.Tensor, name, self.counted(name, getattr(torch.Tensor, name)))
        train_epoch = TrainingLoop.train_epoch

        def watched(loop, progress, started):
            with self.watched(loop):
                return train_epoch(loop, progress, started)

        monkeypatch.setattr(TrainingLoop, "train_epoch", watched)

    def counted(self, name, method):
        def read(tensor, *args, **kwargs):
            if self.counting:
                caller = sys._getframe(1)
                self.calls.append(f"{name} at {caller.f_code.co_filename}:{caller.f_lineno}")
            elif self.watching:
                self.skipped += 1
            return method(tensor, *args, **kwargs)

        return read

    def set(self, counting: bool, syncs_forbidden: bool) -> None:
        self.counting = counting
        if self.cuda:
            torch.cuda.set_sync_debug_mode("error" if syncs_forbidden else 0)

    @contextlib.contextmanager
    def watched(self, loop: TrainingLoop):
        """Count while ``loop`` trains, pausing in the parts left out (the hooks are on the whole model only, so
        the pauses do not nest)."""
        optimizer = getattr(loop.optimizer, "optimizer", loop.optimizer)  # under accelerate's wrapper
        hooks = [optimizer.register_step_pre_hook(lambda *_: self.set(False, True)),  # host step counts: no sync
                 optimizer.register_step_post_hook(lambda *_: self.set(True, True))]
        if loop.models_read_inputs:  # the model checks its inputs' values: its reads, not the loop's
            hooks += [loop.model.register_forward_pre_hook(lambda *_: self.set(False, False)),
                      loop.model.register_forward_hook(lambda *_: self.set(True, True))]
        make_batch = loop.batches.batch

        def batch(*args, **kwargs):
            self.set(False, False)
            made = make_batch(*args, **kwargs)
            self.set(True, True)
            return made

        loop.batches.batch = batch
        self.watching = True
        self.set(True, True)
        try:
            yield
        finally:
            self.set(False, False)
            self.watching = False
            del loop.batches.batch
            for hook in hooks:
                hook.remove()


def check_no_reads(reads: HostReads, results: dict, output_dir: Path) -> None:
    assert reads.calls == [], "the loop read tensors back to the host during the updates"
    assert reads.skipped > 0  # the counting works: batch making and the optimizer read values where they may
    assert results["steps"] == STEPS and math.isfinite(results["train_loss"])
    history = json.loads((output_dir / "training_history.json").read_text())
    logged = [record for record in history if "train_loss" in record]
    assert [record["step"] for record in logged] == [STEPS]  # read once, at the end: the mean of all the updates
    assert logged[0]["train_loss"] == pytest.approx(results["train_loss"], rel=1e-12)


#: the loop's setting for its device, and the GPU's on the CPU: the models' forward counted too
SETTINGS = ["device", "gpu_setting"]


def use_setting(setting: str, monkeypatch) -> None:
    if setting == "gpu_setting":
        monkeypatch.setattr(loop_module, "models_read_inputs_on", lambda device: False)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("build", [tiny_lstm, tiny_transformer_lm], ids=["lstm", "transformer_lm"])
def test_lm_updates_read_nothing_back_from_the_device(build, device, setting, tmp_path, monkeypatch):
    use_setting(setting, monkeypatch)
    tokenizer = char_tokenizer(CORPUS)
    ids = tokenize_texts([CORPUS], tokenizer)
    reads = HostReads(monkeypatch, cuda=device == "cuda")
    results = train_causal_lm(build(len(tokenizer)), tokenizer, ids[:1600], ids[1600:], engine_args(
        tmp_path, max_steps=STEPS, logging_steps=100, eval_strategy="no", save_strategy="no",
        use_cpu=device == "cpu"))
    check_no_reads(reads, results, tmp_path)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("device", DEVICES)
def test_bert_updates_read_nothing_back_from_the_device(device, setting, tmp_path, monkeypatch):
    use_setting(setting, monkeypatch)
    corpus = text_corpus(40)
    (tmp_path / "corpus.txt").write_text(corpus)
    tokenizer = train_tokenizer([str(tmp_path / "corpus.txt")], kind="wordpiece", vocab_size=80, min_frequency=1,
                                add_bert_special_tokens=True)
    documents = tokenize_documents(split_documents(text_corpus(30, seed=5)), tokenizer)
    examples = create_pretraining_examples(documents, SpecialIds.of(tokenizer), max_seq_length=32, seed=0)
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.from_preset("tiny", vocab_size=len(tokenizer), max_position_embeddings=32))
    args = BertPretrainingArguments(output_dir=str(tmp_path / "run"), max_steps=STEPS, per_device_train_batch_size=8,
                                    optim="adamw_torch", learning_rate=3e-3, plot=False, disable_tqdm=True,
                                    use_cpu=device == "cpu", logging_steps=100, eval_strategy="no",
                                    save_strategy="no", lr_scheduler_type="constant")
    reads = HostReads(monkeypatch, cuda=device == "cuda")
    results = pretrain_bert(model, tokenizer, examples[:-16], examples[-16:], args)
    check_no_reads(reads, results, tmp_path / "run")


def test_a_checkpoint_records_every_loss_read_in_order(tmp_path, monkeypatch):
    """The losses kept on the device are read at a checkpoint between logging steps: its state holds the sum,
    count and losses to log of reading each update's loss as it came, to the last bit (also when the losses not
    read yet were joined into one tensor on the way)."""
    tokenizer = char_tokenizer(CORPUS)
    ids = tokenize_texts([CORPUS], tokenizer)
    losses: list[float] = []
    monkeypatch.setattr(TrainingLoop, "unread_chunk", 1)
    train_step = TrainingLoop.train_step
    monkeypatch.setattr(TrainingLoop, "train_step", lambda loop, batches: (
        loss := train_step(loop, batches), losses.append(float(loss)))[0])
    train_causal_lm(tiny_lstm(len(tokenizer)), tokenizer, ids[:1600], ids[1600:], engine_args(
        tmp_path, max_steps=7, logging_steps=4, eval_strategy="no", save_strategy="steps", save_steps=3,
        use_cpu=True))
    for step in (3, 6):
        state = json.loads((tmp_path / f"checkpoint-{step}" / "trainer_state.json").read_text())
        total = 0.0
        for loss in losses[:step]:
            total += loss
        assert state["train_loss_sum"] == total and state["train_loss_count"] == step
        assert state["pending_losses"] == losses[4 if step > 4 else 0 : step]  # logged at step 4


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "right_padded"])
@pytest.mark.parametrize("family", FAMILY_DESCRIPTIONS, ids=lambda family: family.name)
def test_models_give_the_same_results_when_the_caller_vouches_for_the_inputs(family, padded):
    """Under ``inputs_checked_by_caller`` the models skip the checks and shortcuts that read values (an all-ones
    mask is applied rather than dropped): every head's loss and logits, and their gradients, are unchanged."""
    config = family.tiny_config()
    for head in family.heads.values():
        torch.manual_seed(0)
        model = head(config).eval()
        inputs = model_inputs(family, config, head)
        if padded and inputs["attention_mask"].dim() == 2:
            inputs["attention_mask"][1:, -1] = 0  # the second row one token shorter
        results = []
        for vouched in (False, True):
            model.zero_grad()
            with inputs_checked_by_caller() if vouched else contextlib.nullcontext():
                outputs = model(**inputs)
            main = outputs.loss if outputs.get("loss") is not None else outputs[0].float().square().mean()
            main.backward()
            grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            results.append((main.detach(), outputs[1] if outputs.get("loss") is not None else outputs[0], grads))
        (loss, first, grads), (loss_v, first_v, grads_v) = results
        torch.testing.assert_close(loss_v, loss, msg=f"{head.__name__}: loss")
        torch.testing.assert_close(first_v, first, msg=f"{head.__name__}: outputs")
        assert len(grads) == len(grads_v)
        for g, g_v in zip(grads, grads_v, strict=True):
            torch.testing.assert_close(g_v, g)


def test_the_loop_refuses_a_tokenizer_larger_than_the_model(tmp_path):
    """Off the CPU the models leave the ids' range to the loop: the run stops before training when its tokenizer
    has ids the model's embeddings do not, naming both sizes."""
    tokenizer = char_tokenizer(CORPUS)
    ids = tokenize_texts([CORPUS], tokenizer)
    with pytest.raises(ValueError, match=rf"vocab_size={len(tokenizer) - 1} is smaller than the tokenizer's "
                                         rf"{len(tokenizer)} tokens"):
        train_causal_lm(tiny_lstm(len(tokenizer) - 1), tokenizer, ids[:1600], ids[1600:],
                        engine_args(tmp_path, max_steps=1, use_cpu=True))
