# %% [markdown]
# # 3. A nanoGPT-shaped Transformer language model
#
# `TransformerForCausalLM` with the `nanogpt-shakespeare-char` preset: nanoGPT's GPT-2-shaped decoder
# (pre-norm, GELU, learned positions, no biases) for Tiny Shakespeare characters, 6 layers × 6 heads × 384,
# 256 characters of context. We train it on characters, draw the training and validation loss curves, and sample.
#
# At tiny settings the preset is shrunk (2 layers of width 64, 64 characters of context) and trains for a few
# seconds on the slice of Tiny Shakespeare the package ships. `--full` (or `HFSM_TUTORIAL_FULL=1`) trains the
# preset as it is on the whole corpus from `../shared/data/tinyshakespeare/input.txt` beside the repository,
# nanoGPT's recipe: meant for a GPU, which it uses when there is one (about a minute there; hours on a CPU).

# %%
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
from transformers import set_seed

import hf_seqmodels
from hf_seqmodels import TransformerForCausalLM, TransformerLMConfig
from hf_seqmodels.tokenization import train_tokenizer

FULL = os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv
set_seed(0)
device = torch.device("cuda" if FULL and torch.cuda.is_available() else "cpu")
OUTPUT = Path(tempfile.gettempdir()) / "hf_seqmodels-tutorials" / "03_transformer_lm"  # figures
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
# ## Characters
#
# As in tutorial 1: a character tokenizer trained on the first 90 % of the text, the last 10 % held out.

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

# %% [markdown]
# ## The preset, and what the tiny run changes
#
# `from_preset(name, **overrides)` starts from the preset and overrides fields; the HF names
# (`hidden_size`, `num_hidden_layers`, ...) and the fields' own names (`d_model`, `decoder_layers`, ...) both work.

# %%
shrink = {} if FULL else dict(d_model=64, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=256,
                              max_position_embeddings=64, dropout=0.0, attention_dropout=0.0)
config = TransformerLMConfig.from_preset("nanogpt-shakespeare-char", vocab_size=len(tokenizer),
                                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                                         eos_token_id=tokenizer.eos_token_id, **shrink)
model = TransformerForCausalLM(config).to(device)
print(f"{config.num_hidden_layers} layers × {config.num_attention_heads} heads × {config.hidden_size}, "
      f"context {config.max_position_embeddings}: {sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## Training with a loss curve
#
# nanoGPT's recipe: AdamW (β₂ = 0.99), learning rate 1e-3, batches of random windows as long as the context.
# Every `eval_every` updates we also score held-out windows.

# %%
block_size = config.max_position_embeddings
batch_size, steps, eval_every = (64, 5000, 250) if FULL else (32, 160, 20)
eval_batches = 20 if FULL else 2  # random held-out windows scored at each evaluation
generator = torch.Generator().manual_seed(0)


def windows(ids: torch.Tensor, count: int) -> torch.Tensor:
    starts = torch.randint(0, len(ids) - block_size, (count,), generator=generator).tolist()
    return torch.stack([ids[s : s + block_size] for s in starts]).to(device)  # (count, block_size)


@torch.no_grad()
def held_out_loss() -> float:
    model.eval()
    loss = sum(model(input_ids=(batch := windows(valid_ids, batch_size)), labels=batch).loss.item()
               for _ in range(eval_batches)) / eval_batches
    model.train()
    return loss


optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
train_curve, valid_curve, started = [], [], time.perf_counter()
model.train()
for step in range(1, steps + 1):
    batch = windows(train_ids, batch_size)
    loss = model(input_ids=batch, labels=batch).loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    train_curve.append((step, loss.item()))
    if step % eval_every == 0:
        valid_curve.append((step, held_out_loss()))
        print(f"step {step:5d}  train {loss.item():.3f}  validation {valid_curve[-1][1]:.3f}  "
              f"({time.perf_counter() - started:.0f} s)")

# %%
plt.figure(figsize=(6, 3.5))
plt.plot(*zip(*train_curve, strict=True), label="training batch", alpha=0.6)
plt.plot(*zip(*valid_curve, strict=True), label="validation", marker="o")
plt.xlabel("update")
plt.ylabel("loss (nats/char)")
plt.title(f"Transformer LM, {config.num_hidden_layers} × {config.hidden_size}")
plt.legend()
plt.tight_layout()
plt.savefig(OUTPUT / "loss_curve.png")
plt.show()

# %% [markdown]
# ## Sampling
#
# `generate()` keeps the keys and values of the prompt and of every generated character in a cache, so each step
# attends over the past without recomputing it. The context is `max_position_embeddings` long: prompt and new
# tokens together must fit in it.

# %%
model.eval()
prompt = tokenizer("JULIET:\n", return_tensors="pt").to(device)
new_tokens = block_size - prompt["input_ids"].shape[1]
sample = model.generate(**prompt, max_new_tokens=new_tokens, do_sample=True, temperature=0.8, top_k=40)
print(tokenizer.decode(sample[0], skip_special_tokens=True))
