# %% [markdown]
# # 1. A character-level LSTM on Tiny Shakespeare
#
# Karpathy's char-rnn as a Hugging Face model: train a character tokenizer, train an LSTM language model
# (`RNNForCausalLM`, preset `char-rnn`) on Tiny Shakespeare, measure validation perplexity, and write new
# Shakespeare with `generate()`.
#
# The tutorial runs in seconds at its tiny settings, on the slice of Tiny Shakespeare the package ships.
# `python docs/tutorials/01_char_lstm.py --full` (or `HFSM_TUTORIAL_FULL=1` in a notebook) trains the preset's
# 2 × 512 LSTM on the whole corpus from `../shared/data/tinyshakespeare/input.txt` beside the repository
# (about 20 minutes on a laptop CPU).

# %%
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:  # a plain `python` run draws into files instead of windows
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from transformers import AutoModelForCausalLM, set_seed

import hf_seqmodels  # registers the model types with the Auto classes
from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.tokenization import train_tokenizer

FULL = os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv
set_seed(0)
OUTPUT = Path(tempfile.gettempdir()) / "hf_seqmodels-tutorials" / "01_char_lstm"  # figures, saved model
OUTPUT.mkdir(parents=True, exist_ok=True)


def shared_data(relative: str) -> Path:
    """A file of the shared datasets beside the repository (`../shared/data/...`), for the full-size run."""
    start = Path(globals().get("__file__", Path.cwd())).resolve()
    root = next((p for p in (start, *start.parents) if (p / "pyproject.toml").is_file()), Path.cwd())
    path = root.parent / "shared" / "data" / relative
    if not path.is_file():
        raise FileNotFoundError(f"--full needs {path} (the shared datasets beside the repository); "
                                "run without --full to use the data the package ships")
    return path


# %% [markdown]
# ## The corpus and a character tokenizer
#
# The first 90 % of the text trains, the last 10 % validates. `train_tokenizer(kind="char")` gives a
# `PreTrainedTokenizerFast` with one token per character plus `<pad>`, `<unk>`, `<bos>` and `<eos>`.

# %%
if FULL:
    text = shared_data("tinyshakespeare/input.txt").read_text(encoding="utf-8")
else:
    text = (Path(hf_seqmodels.__file__).parent / "data" / "tiny_shakespeare.txt").read_text(encoding="utf-8")
    text = text[:60_000]
split = int(0.9 * len(text))
tokenizer = train_tokenizer(texts=[text[:split]], kind="char", vocab_size=128, min_frequency=1)
train_ids = torch.tensor(tokenizer(text[:split], add_special_tokens=False)["input_ids"])
valid_ids = torch.tensor(tokenizer(text[split:], add_special_tokens=False)["input_ids"])
print(f"{len(tokenizer)} tokens in the vocabulary; {len(train_ids):,} training and {len(valid_ids):,} "
      f"validation characters")

# %% [markdown]
# ## The model
#
# The `char-rnn` preset is char-rnn's network: 2 LSTM layers of 512 units, dropout 0.2. At tiny settings we
# shrink it to one layer of 128 units. Every size is a config field, checked when the config is built.

# %%
sizes = {} if FULL else dict(hidden_size=128, num_hidden_layers=1, hidden_dropout_prob=0.0)
config = RNNConfig.from_preset("char-rnn", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                               bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **sizes)
model = RNNForCausalLM(config)
print(f"{config.cell_type.upper()}, {config.num_hidden_layers} x {config.hidden_size}: "
      f"{sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## Training
#
# Random windows of `block_size` characters; the model shifts the labels itself, so `labels=input_ids`
# trains it to predict each next character. Adam at char-rnn's 2e-3, gradients clipped at 5.

# %%
block_size, batch_size = (100, 50) if FULL else (64, 32)
steps = 3000 if FULL else 150


def random_windows(ids: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)
    return torch.stack([ids[s : s + block_size] for s in starts.tolist()])  # (batch, block_size)


@torch.no_grad()
def validation_loss(model) -> float:
    model.eval()
    windows = valid_ids[: len(valid_ids) // block_size * block_size].view(-1, block_size)
    losses = [model(input_ids=batch, labels=batch).loss.item() for batch in windows.split(64)]
    model.train()
    return sum(losses) / len(losses)


optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
generator = torch.Generator().manual_seed(0)
history, started = [], time.perf_counter()
model.train()
for step in range(1, steps + 1):
    batch = random_windows(train_ids, generator)
    loss = model(input_ids=batch, labels=batch).loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    history.append(loss.item())
    if step % (steps // 5) == 0:
        print(f"step {step:5d}  training loss {loss.item():.3f}  ({time.perf_counter() - started:.0f} s)")
valid = validation_loss(model)
print(f"validation loss {valid:.3f} nats/char, perplexity {math.exp(valid):.2f}")

# %%
plt.figure(figsize=(6, 3))
plt.plot(history)
plt.xlabel("update")
plt.ylabel("training loss (nats/char)")
plt.title("Character LSTM on Tiny Shakespeare")
plt.tight_layout()
plt.savefig(OUTPUT / "loss_curve.png")
plt.show()

# %% [markdown]
# ## Generation
#
# `generate()` carries the LSTM's state from step to step (the state is the generation cache). Greedy decoding
# soon repeats itself; sampling with a temperature and top-k reads more like the plays.

# %%
model.eval()
prompt = tokenizer("ROMEO:\n", return_tensors="pt")  # <bos> R O M E O : \n
greedy = model.generate(**prompt, max_new_tokens=120, do_sample=False)
sampled = model.generate(**prompt, max_new_tokens=120, do_sample=True, temperature=0.8, top_k=40)
print("greedy:\n" + tokenizer.decode(greedy[0], skip_special_tokens=True))
print("\nsampled:\n" + tokenizer.decode(sampled[0], skip_special_tokens=True))

# %% [markdown]
# ## Save and load
#
# `save_pretrained` writes `config.json`, `model.safetensors` and the model code; the Auto classes load it back.

# %%
model.save_pretrained(OUTPUT / "model")
tokenizer.save_pretrained(OUTPUT / "model")
reloaded = AutoModelForCausalLM.from_pretrained(OUTPUT / "model").eval()
again = reloaded.generate(**prompt, max_new_tokens=120, do_sample=False)
assert torch.equal(again, greedy), "the reloaded model generates other text"
print(f"saved to {OUTPUT / 'model'} and reloaded as {type(reloaded).__name__}: same greedy text")
