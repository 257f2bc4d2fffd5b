"""Gradient accumulation in the training engine: an update over several batches equals one update over
their union, for losses normalised by a count the batches carry (the trap of HF_FACTS §6: unequal batches)
and for losses that are means over equally many targets; an epoch's last update takes what is left; and
2 processes accumulating (DDP, FSDP2, DeepSpeed ZeRO-2) make the updates of 1 process accumulating."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import safetensors.torch
import torch
from accelerate import Accelerator
from distributed_utils import launch_two_cpu_processes
from test_training_bert import text_corpus

from hf_seqmodels.tokenization import train_tokenizer
from hf_seqmodels.training.bert.cli import main as bert_main
from hf_seqmodels.training.core.arguments import EngineArguments
from hf_seqmodels.training.core.checkpointing import TrainerState
from hf_seqmodels.training.core.loop import TrainingLoop, share_counts
from hf_seqmodels.training.lm.data import Window
from hf_seqmodels.training.lm.trainer import LMTrainingLoop


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(folder / "model.safetensors"))


def curve(folder: Path) -> list[float]:
    history = json.loads((folder / "training_history.json").read_text())
    return [record["train_loss"] for record in history if "train_loss" in record]


class RowBatches:
    """Fixed batches of a regression problem; ``sizes`` rows each."""

    carries_state = False

    def __init__(self, sizes: list[int], seed: int = 0):
        generator = torch.Generator().manual_seed(seed)
        self.rows = [(torch.randn(n, 3, generator=generator), torch.randn(n, 1, generator=generator)) for n in sizes]

    def __len__(self) -> int:
        return len(self.rows)

    def batch(self, index: int, epoch: int = 0) -> dict:
        x, y = self.rows[index]
        return {"x": x, "y": y, "num_rows": len(x)}


class SumOverCount(TrainingLoop):
    """Squared error summed over the rows and divided by the count the batch carries."""

    def __init__(self, *args, batches, **kwargs):
        self._batches = batches
        super().__init__(*args, **kwargs)

    def build_batches(self, model):
        return self._batches

    def compute_loss(self, batch):
        error = (self.model(batch["x"]) - batch["y"]).pow(2).sum()
        return error / batch["num_rows"], len(batch["x"])

    def evaluate_metrics(self, model):
        return {"eval_loss": 0.0}

    def micro_batch_weights(self, batches):
        return share_counts(batches, ("num_rows",))


class MeanLoss(SumOverCount):
    """The mean over the batch's rows, with the engine's default weights."""

    def compute_loss(self, batch):
        return (self.model(batch["x"]) - batch["y"]).pow(2).mean(), len(batch["x"])

    micro_batch_weights = TrainingLoop.micro_batch_weights


def loop(cls, model, batches, tmp_path, accumulation: int = 1, **kwargs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    settings = dict(output_dir=str(tmp_path), optim="adamw_torch", learning_rate=0.1, lr_scheduler_type="constant",
                    gradient_accumulation_steps=accumulation, max_grad_norm=0, plot=False, disable_tqdm=True,
                    use_cpu=True, num_train_epochs=1)
    args = EngineArguments(**{**settings, **kwargs}).filled()  # as the train_* functions fill them
    return cls(model, None, args, Accelerator(cpu=True), batches=batches)


def union(batches: RowBatches, indices: list[int]) -> RowBatches:
    merged = copy.copy(batches)
    merged.rows = [(torch.cat([batches.rows[i][0] for i in indices]), torch.cat([batches.rows[i][1] for i in indices]))]
    return merged


@pytest.mark.parametrize("cls, sizes", [(SumOverCount, [3, 5]), (MeanLoss, [4, 4])])
def test_an_accumulated_update_equals_one_update_over_the_union(cls, sizes, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    batches = RowBatches(sizes)
    accumulated = loop(cls, copy.deepcopy(model), batches, tmp_path / "a", accumulation=len(sizes))
    whole = loop(cls, copy.deepcopy(model), union(batches, list(range(len(sizes)))), tmp_path / "b")
    loss_a = accumulated.train_step([batches.batch(i) for i in range(len(sizes))]).item()  # kept on the device
    loss_b = whole.train_step([whole.batches.batch(0)]).item()
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    for a, b in zip(accumulated.model.parameters(), whole.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert not torch.equal(next(accumulated.model.parameters()), next(model.parameters()))  # it did update


def test_unequal_batches_weighted_equally_would_differ(tmp_path):
    """The check above can fail: averaging the two batch means (3 and 5 rows) is not the mean over 8 rows."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    batches = RowBatches([3, 5])
    naive = loop(MeanLoss, copy.deepcopy(model), batches, tmp_path / "a", accumulation=2)
    whole = loop(MeanLoss, copy.deepcopy(model), union(batches, [0, 1]), tmp_path / "b")
    assert naive.train_step([batches.batch(0), batches.batch(1)]).item() != pytest.approx(
        whole.train_step([whole.batches.batch(0)]).item(), rel=1e-3)


def test_an_epoch_of_five_batches_makes_three_updates_of_two_two_and_one(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    batches = RowBatches([2, 3, 4, 5, 6])
    run = loop(SumOverCount, copy.deepcopy(model), batches, tmp_path / "a", accumulation=2, num_train_epochs=2)
    seen = []
    original = run.train_step
    run.train_step = lambda group: seen.append([b["num_rows"] for b in group]) or original(group)
    results = run.run()
    assert run.total_steps == results["steps"] == 6
    assert seen == [[2, 3], [4, 5], [6]] * 2  # each update's batches, by their numbers of rows
    reference = loop(SumOverCount, copy.deepcopy(model), batches, tmp_path / "b", num_train_epochs=2)
    for group in ([0, 1], [2, 3], [4], [0, 1], [2, 3], [4]):
        reference.train_step([union(batches, group).batch(0)])
    for a, b in zip(run.model.parameters(), reference.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_only_the_last_batch_of_an_update_syncs_its_gradients(tmp_path):
    """accelerate's ``sync_gradients`` (what DeepSpeed steps on, what DDP's all-reduce follows) is True for the
    last batch of each update only, the epoch's short last update included."""
    torch.manual_seed(0)
    run = loop(SumOverCount, torch.nn.Linear(3, 1), RowBatches([2, 3, 4, 5, 6]), tmp_path, accumulation=2)
    synced = []
    original = run.compute_loss
    run.compute_loss = lambda batch: synced.append(run.accelerator.sync_gradients) or original(batch)
    run.run()
    assert synced == [False, True, False, True, True]


def test_lm_windows_are_weighted_by_their_number_of_labels():
    windows = [Window(torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 8, dtype=torch.long)),
               Window(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))]
    weights = LMTrainingLoop.micro_batch_weights(None, windows)
    assert weights == pytest.approx([2 / 3, 1 / 3])


def test_resuming_with_another_accumulation_is_refused(tmp_path):
    torch.manual_seed(0)
    batches = RowBatches([2, 3, 4, 5])
    run = loop(SumOverCount, torch.nn.Linear(3, 1), batches, tmp_path, accumulation=2)
    run.run()
    state = TrainerState.from_json((tmp_path / "checkpoint-2" / "trainer_state.json").read_text())
    assert state.gradient_accumulation_steps == 2
    again = loop(SumOverCount, torch.nn.Linear(3, 1), batches, tmp_path, accumulation=1,
                 resume_from_checkpoint="latest")
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2, this run has 1"):
        again.maybe_resume()


def test_gradient_accumulation_steps_below_one_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        EngineArguments(output_dir=str(tmp_path), gradient_accumulation_steps=0)


def test_bert_pretraining_counts_updates_not_batches(tmp_path):
    """Through the CLI: an epoch of N batches with 3 per update is ceil(N / 3) updates."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    results = bert_main(["--train_file", str(corpus), "--vocab_size", "80", "--min_frequency", "1",
                         "--preset", "tiny", "--max_seq_length", "32", "--config_overrides", "max_position_embeddings=32",
                         "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "3",
                         "--num_train_epochs", "2", "--logging_steps", "1", "--no_plot", "--disable_tqdm",
                         "--use_cpu", "--output_dir", str(tmp_path / "out")])
    state = TrainerState.from_json((tmp_path / "out" / "checkpoint-{}".format(results["steps"])
                                    / "trainer_state.json").read_text())
    per_epoch = -(-state.windows_per_epoch // 3)
    assert state.windows_per_epoch > 3 and results["steps"] == 2 * per_epoch


@pytest.mark.parametrize("kind", ["ddp", "fsdp", "deepspeed"])
@pytest.mark.slow
def test_two_processes_accumulating_match_one_process_accumulating(kind, tmp_path):
    """BERT pretraining, 2 processes (DDP, FSDP2 or DeepSpeed ZeRO-2) with 2 sentence pairs each and 2
    batches per update, against 1 process with 4 pairs and 2 batches per update: the same global batches,
    masks and normalisation, so the same losses and weights (no dropout)."""
    if kind == "deepspeed":
        pytest.importorskip("deepspeed")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text_corpus(40, seed=7))
    # one tokenizer for both runs: training a WordPiece vocabulary twice can order its tokens differently
    train_tokenizer([str(corpus)], kind="wordpiece", vocab_size=80, min_frequency=1,
                    add_bert_special_tokens=True).save_pretrained(tmp_path / "tok")
    common = ["--train_file", str(corpus), "--tokenizer_name", str(tmp_path / "tok"), "--preset", "tiny",
              "--max_seq_length", "32", "--config_overrides",
              "max_position_embeddings=32,hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0",
              "--validation_split_percentage", "20", "--max_steps", "4", "--gradient_accumulation_steps", "2",
              "--logging_steps", "1", "--optim", "adamw_torch", "--learning_rate", "1e-3", "--max_grad_norm", "1.0",
              "--disable_tqdm", "--no_plot"]
    launch_two_cpu_processes("pretrain_bert.py", [*common, "--output_dir", str(tmp_path / "two"),
                                                  "--per_device_train_batch_size", "2"],
                             fsdp=kind == "fsdp", deepspeed=kind == "deepspeed")
    one = bert_main([*common, "--output_dir", str(tmp_path / "one"), "--per_device_train_batch_size", "4",
                     "--use_cpu"])
    assert one["steps"] == 4
    a, b = weights(tmp_path / "two"), weights(tmp_path / "one")
    assert a.keys() == b.keys()
    for name in (n for n in b if not n.endswith("k_proj.bias")):  # see test_training_bert: its gradient is 0
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)
    assert len(curve(tmp_path / "one")) == 4 and curve(tmp_path / "one")[-1] < curve(tmp_path / "one")[0]
    torch.testing.assert_close(torch.tensor(curve(tmp_path / "two")), torch.tensor(curve(tmp_path / "one")),
                               atol=1e-5, rtol=1e-5)
    if kind == "deepspeed":
        checkpoint = tmp_path / "two" / "checkpoint-4"
        assert json.loads((checkpoint / "trainer_state.json").read_text())["deepspeed"] is True
        assert not (checkpoint / "optimizer.pt").exists()
        assert len(list((checkpoint / "deepspeed").glob("*optim_states.pt"))) == 2  # one partition per process
