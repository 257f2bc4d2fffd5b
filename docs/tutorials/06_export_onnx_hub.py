# %% [markdown]
# # 6. Deploy: ONNX export, generation in onnxruntime, sharing on the Hub
#
# A trained model leaves Python-with-this-package in three ways:
#
# 1. `hf_seqmodels.export.export_model` writes an ONNX program of the forward pass and the decoding graphs of a
#    generative head, each checked against eager mode;
# 2. `OnnxGenerator` decodes with onnxruntime and numpy alone: greedy and beam search give eager `generate()`'s
#    tokens;
# 3. `hf_seqmodels.cards.save_for_hub` writes a Hub-ready folder (weights, code, tokenizer, model card) that loads
#    with `trust_remote_code=True` without this package, and `push_folder_to_hub(..., dry_run=True)` writes
#    exactly what would be uploaded, without touching the network.
#
# The model is a small character-level GRU trained for a few seconds on the slice of Tiny Shakespeare the
# package ships. `--full` (or `HFSM_TUTORIAL_FULL=1`) trains a 2 × 256 GRU on the whole corpus from
# `../shared/data/tinyshakespeare/input.txt` beside the repository first (about 10 minutes on a laptop CPU).

# %%
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, set_seed

import hf_seqmodels
from hf_seqmodels import RNNConfig, RNNForCausalLM
from hf_seqmodels.cards import save_for_hub
from hf_seqmodels.export import OnnxGenerator, export_model
from hf_seqmodels.publishing import push_folder_to_hub
from hf_seqmodels.tokenization import train_tokenizer

FULL = os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv
set_seed(0)
OUTPUT = Path(tempfile.mkdtemp(prefix="hf_seqmodels-tutorial-06-"))  # a new folder each run: the exports
print(f"writing to {OUTPUT}")


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
# ## A model to deploy
#
# Tutorial 1 in brief: a character tokenizer and a GRU language model, trained on random windows.

# %%
if FULL:
    text = shared_data("tinyshakespeare/input.txt").read_text(encoding="utf-8")
else:
    text = (Path(hf_seqmodels.__file__).parent / "data" / "tiny_shakespeare.txt").read_text(encoding="utf-8")[:30_000]
tokenizer = train_tokenizer(texts=[text], kind="char", vocab_size=128, min_frequency=1)
ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"])
config = RNNConfig.from_preset("char-rnn", cell_type="gru", vocab_size=len(tokenizer), hidden_size=256 if FULL else 64,
                               num_hidden_layers=2 if FULL else 1, hidden_dropout_prob=0.1 if FULL else 0.0,
                               pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                               eos_token_id=tokenizer.eos_token_id)
model = RNNForCausalLM(config)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
generator = torch.Generator().manual_seed(0)
steps = 3000 if FULL else 80
for _ in range(steps):
    starts = torch.randint(0, len(ids) - 64, (32,), generator=generator).tolist()
    batch = torch.stack([ids[s : s + 64] for s in starts])  # (32, 64)
    loss = model(input_ids=batch, labels=batch).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.eval()
print(f"training loss after {steps} updates: {loss.item():.3f} nats/char")

# %% [markdown]
# ## Export to ONNX
#
# `export_model` exports the forward pass with dynamic batch and sequence dimensions (`model.onnx`), runs it in
# onnxruntime on inputs of another size than the example and compares every output with eager mode; for a
# generative head it also writes the decoding graphs (`decoder_model.onnx`, `decoder_with_past.onnx`: the GRU's
# state in and out) and checks that greedy decoding through them gives `generate()`'s tokens.

# %%
exported = export_model(model, OUTPUT / "onnx", format="onnx")
print(f"{exported.path.name}: inputs {exported.inputs}, outputs {exported.outputs}")
print(f"largest difference from eager mode: {exported.parity:.2e}; decoding graphs: {sorted(exported.generation)}; "
      f"greedy decoding equal to generate(): {exported.generation_parity}")

# %% [markdown]
# ## Generate with onnxruntime
#
# `OnnxGenerator` reads the folder and needs only numpy and onnxruntime: this part runs on a machine without torch.

# %%
onnx_lm = OnnxGenerator(OUTPUT / "onnx")
prompt = np.array([tokenizer("ROMEO:\n")["input_ids"]])
greedy = onnx_lm.greedy(prompt, max_new_tokens=60)
eager = model.generate(torch.tensor(prompt), max_new_tokens=60, do_sample=False)
assert greedy.tolist() == eager.tolist(), "onnxruntime's greedy decoding differs from generate()"
beams = onnx_lm.beam_search(prompt, num_beams=4, max_new_tokens=60)
sampled = onnx_lm.sample(prompt, max_new_tokens=60, temperature=0.8, top_k=40, seed=0)
for name, tokens in (("greedy (= generate())", greedy), ("beam search", beams), ("sampled", sampled)):
    print(f"--- {name}\n{tokenizer.decode(tokens[0], skip_special_tokens=True)}")

# %% [markdown]
# ## Share on the Hub, as a dry run
#
# `save_for_hub` writes the folder a Hub repository needs: `config.json` with an `auto_map` for every head of the
# family, `model.safetensors`, the model code, the tokenizer and a model card. On a machine without this package,
# `AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` runs the folder's own copy of the model
# code; here, where the package is imported, its registered class reads the folder.

# %%
folder = save_for_hub(OUTPUT / "hub", model, tokenizer=tokenizer, results={"train_loss": round(loss.item(), 3)},
                      training_data="Tiny Shakespeare (characters)")
remote = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
assert torch.equal(remote.generate(torch.tensor(prompt), max_new_tokens=60, do_sample=False), eager)
print(f"reloaded as {type(remote).__name__}: the same greedy text")
print((folder / "README.md").read_text(encoding="utf-8")[:600])

# %% [markdown]
# `push_folder_to_hub(folder, repo_id)` validates the folder and uploads only the model's files (an allow-list:
# no checkpoints, no pickles). With `dry_run=True` it touches no network: it writes exactly the files that would
# go up into `dry_run_dir` and returns its path. Without the dry run it would need a token (`huggingface-cli
# login` or `HF_TOKEN`); `hf-seqmodels push --dry-run` does the same from the command line.

# %%
staged = Path(push_folder_to_hub(folder, "your-name/shakespeare-char-gru", dry_run=True,
                                 dry_run_dir=OUTPUT / "would-upload"))
for path in sorted(staged.rglob("*")):
    if path.is_file():
        print(f"{path.relative_to(staged)!s:32s} {path.stat().st_size:>9,} bytes")
