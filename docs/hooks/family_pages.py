"""One documentation page per model family, written from the registry at build time.

Everything on a family page comes from the code: the family's :class:`~hf_seqmodels.families.Family` entry
in :data:`hf_seqmodels.registry.FAMILY_DESCRIPTIONS` (heads, capabilities, recipes), its configuration class
(fields, defaults, the declared ranges of ``config_utils.FIELD_RANGES``, the ``Args:`` of its docstring,
``PRESETS``), transformers' pipeline registry (the task of each head), the export code (which heads get
decoding graphs), the model cards of ``model_cards/`` tagged with the family's ``model_type``, and the
family's prose in ``hf_seqmodels/templates/families/<model_type>.md`` (the one part a person writes; the
model cards use the same text). The usage example of each page is executed when the page is written and its
output shown; an example that raises stops the build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROSE_DIR = ROOT / "hf_seqmodels" / "templates" / "families"
CARDS_DIR = ROOT / "model_cards"
CARD_IMAGES = ("loss_curve.png", "attention.png", "self_attention.png")
RANGE_TEXT = {"positive": "> 0", "non_negative": ">= 0", "probability": "[0, 1)"}


@dataclass
class FamilyPage:
    """A written family page: its path in the site, its markdown, the files it shows (site path -> source
    file) and what is wrong with the family's documentation (a build fails on any)."""

    path: str
    markdown: str
    images: dict[str, Path] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def page_path(family) -> str:
    return f"models/{family.name}.md"


def family_title(family) -> str:
    return f"{family.config_class.__name__.removesuffix('Config')} (`{family.config_class.model_type}`)"


# ------------------------------------------------------------------------------------------- config ----
def docstring_args(cls: type) -> dict[str, str]:
    """``{field: description}`` from the ``Args:`` section of ``cls``'s docstring (``a, b: text`` gives both)."""
    doc = textwrap.dedent((cls.__doc__ or "").split("\n", 1)[-1])
    match = re.search(r"^Args:\n(.*?)(?:\n\S|\Z)", doc, flags=re.S | re.M)
    if not match:
        return {}
    described, names = {}, []
    for line in match.group(1).splitlines():
        entry = re.match(r"^ {4}([\w, ]+?):\s*(.*)$", line)
        if entry and not line.startswith(" " * 5):
            names = [n.strip() for n in entry.group(1).split(",")]
            for name in names:
                described[name] = entry.group(2).strip()
        elif names and line.strip():
            for name in names:
                described[name] += " " + line.strip()
    return described


def config_fields(config_class: type) -> list[tuple[str, str, Any, str, str]]:
    """``(name, type, default, allowed range, description)`` of every field the class declares itself."""
    from hf_seqmodels.models.config_utils import FIELD_RANGES

    ranges = {**FIELD_RANGES, **getattr(config_class, "FIELD_RANGES", {})}
    own = set()
    for klass in config_class.__mro__:
        if klass.__module__.startswith("hf_seqmodels"):
            own |= set(getattr(klass, "__annotations__", {}))
    described = docstring_args(config_class)
    rows = []
    for item in dataclasses.fields(config_class):
        if item.name not in own or item.name.isupper():
            continue
        default = item.default if item.default is not dataclasses.MISSING else (
            item.default_factory() if item.default_factory is not dataclasses.MISSING else "required")
        kind = str(item.type)
        allowed = RANGE_TEXT.get(ranges.get(item.name, ""), "")
        if allowed == "> 0" and "float" not in kind:
            allowed = ">= 1"
        rows.append((item.name, kind, default, allowed, described.get(item.name, "")))
    return rows


def _cell(text: Any) -> str:
    """``text`` for a table cell (a ``|`` inside backticks needs no escape: the table reads code spans whole)."""
    return str(text).replace("\n", " ")


def _plain(text: str) -> str:
    """A docstring's reST roles and literals as markdown code: ``:mod:`x``` and ````x```` become ```x```."""
    text = re.sub(r"``([^`]+)``", r"`\1`", re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text))
    parts = re.split(r"(`[^`]*`)", text)  # a `|` outside code would end the cell; inside it is read as it is
    return "".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))


def config_section(family) -> list[str]:
    cls = family.config_class
    lines = ["## Configuration", "",
             f"[`{cls.__name__}`][hf_seqmodels.{cls.__name__}] (`model_type = \"{cls.model_type}\"`). Every field "
             "is checked when the config is built: a value of the wrong type or outside its range raises "
             "`ConfigValidationError` naming the class, the field, the value and what is allowed.", "",
             "| Field | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
    for name, kind, default, allowed, text in config_fields(cls):
        lines.append(f"| `{name}` | `{_cell(kind)}` | `{_cell(repr(default))}` | {allowed} | {_plain(_cell(text))} |")
    return lines + [""]


# -------------------------------------------------------------------------------------------- heads ----
def pipeline_tasks(auto_class: type) -> list[str]:
    """The text pipeline tasks whose model classes include ``auto_class``."""
    from transformers.pipelines import PIPELINE_REGISTRY

    return sorted(task for task, spec in PIPELINE_REGISTRY.supported_tasks.items()
                  if spec.get("type") == "text" and auto_class in spec.get("pt", ()))


def decoding_graphs(model) -> str:
    """What ``export_model`` writes for decoding, as a sentence fragment."""
    from hf_seqmodels.export.step_graphs import generation_graphs

    try:
        found = generation_graphs(model)
    except ValueError as error:
        return f"no decoding graphs ({error})"
    if found is None:
        return "—"
    kind, graphs, _ = found
    return f"{kind}: " + ", ".join(f"`{graph.file}`" for graph in graphs)


def heads_section(family) -> tuple[list[str], list[type]]:
    """The heads table, and the heads that generate."""
    config = family.tiny_config()
    lines = ["## Heads", "",
             "| Auto class | Model class | Pipeline tasks | `generate()` | Decoding graphs (ONNX) |",
             "|---|---|---|---|---|"]
    generative = []
    for auto_class, model_class in family.heads.items():
        model = model_class(config).eval()
        if model.can_generate():
            generative.append(model_class)
        tasks = ", ".join(f"`{task}`" for task in pipeline_tasks(auto_class)) or "—"
        lines.append(f"| `{auto_class.__name__}` | [`{model_class.__name__}`][hf_seqmodels.{model_class.__name__}] "
                     f"| {tasks} | {'yes' if model.can_generate() else '—'} | {decoding_graphs(model)} |")
    return lines + [""], generative


def behaviour_section(family, generative: list[type]) -> list[str]:
    """Cache, generation and export, from the family's capabilities."""
    caps = family.capabilities
    lines = ["## Cache, generation and export", ""]
    if generative:
        if caps.stateful_cache:
            cache = ("the cache is the model's state (`RecurrentState`): a fixed size whatever the length, one "
                     "step of the network per new token; beam search reorders it, and a prompt continues from a "
                     "state passed back in")
        else:
            cache = "the cache holds every layer's keys and values (transformers' `DynamicCache`)"
            if caps.static_cache:
                cache += "; `cache_implementation=\"static\"` and `torch.compile(fullgraph=True)` work"
        lines.append(f"- `generate()` (greedy, sampling, beam search): {cache}.")
    else:
        lines.append("- No head generates: the family's models score or label their input.")
    facts = [("is_encoder_decoder", "encoder-decoder: `decoder_input_ids`, `encoder_outputs`"),
             ("inputs_embeds", "`forward(inputs_embeds=...)` takes vectors instead of ids"),
             ("sdpa", "`attn_implementation` = `eager` or `sdpa`"),
             ("tied_embeddings", "`tie_word_embeddings` ties the output layer to the input embeddings"),
             ("gradient_checkpointing", "`gradient_checkpointing_enable()` recomputes the layers in the backward pass"),
             ("mask_removes_tokens", "a 0 in `attention_mask` gives the result of deleting that token")]
    lines += [f"- {text[0].upper()}{text[1:]}." for name, text in facts if getattr(caps, name)]
    lines += ["- Export: every head with `hf_seqmodels.export.export_model` (`torch.export` or ONNX, checked "
              "against eager mode); the generative heads also get the decoding graphs named in the table above, "
              "which `OnnxGenerator` runs with onnxruntime alone. See [Export](../export.md).", ""]
    return lines


# ------------------------------------------------------------------------------------------ presets ----
def _recipe_text(recipe: dict) -> str:
    return ", ".join(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value!r}"
                     for key, value in recipe.items())


def presets_section(family) -> list[str]:
    from hf_seqmodels.families import parameter_count

    cls = family.config_class
    lines = ["## Presets", "",
             f"`{cls.__name__}.from_preset(name, **overrides)`; the parameter count is that of "
             f"`{family.main_head.__name__}`. `hf-seqmodels presets --family {family.name}` prints the same; "
             "the training scripts take the recipe (`--preset NAME`; flags on the command line override it).", "",
             "| Preset | Fields set | Parameters | Training recipe |", "|---|---|---|---|"]
    for name in cls.available_presets():
        config = cls.from_preset(name)
        count = parameter_count(family.main_head, config)
        fields = ", ".join(f"`{key}={value!r}`" for key, value in cls.PRESETS[name].items())
        recipe = family.training_recipe(name)
        lines.append(f"| `{name}` | {_cell(fields)} | {count:,} | {_cell(_recipe_text(recipe))} |")
    for task, recipe in family.task_recipes.items():
        lines.append(f"\nFine-tuning `{task}` takes its own recipe: {_cell(_recipe_text(dict(recipe)))}.")
    return lines + [""]


# ------------------------------------------------------------------------------------------ example ----
def usage_example(family) -> str:
    """A runnable example of the family's main head at the tiny preset."""
    import hf_seqmodels

    cls, head = family.config_class, family.main_head
    auto = next(a.__name__ for a, m in family.heads.items() if m is head)
    module = "hf_seqmodels" if cls.__name__ in hf_seqmodels.__all__ else cls.__module__
    lines = ["import torch", "import hf_seqmodels  # registers the model types with the Auto classes",
             f"from {module} import {cls.__name__}", f"from transformers import {auto}", "",
             f'config = {cls.__name__}.from_preset("tiny")',
             f"model = {auto}.from_config(config).eval()",
             f'model.save_pretrained("tiny-{family.name}")  # config.json, model.safetensors and the code',
             f'model = {auto}.from_pretrained("tiny-{family.name}").eval()']
    if family.capabilities.is_encoder_decoder:
        lines += ["source = torch.tensor([[17, 42, 9, 3]])  # source ids ending with <eos>",
                  "print(model.generate(source, num_beams=2, max_new_tokens=8).shape)"]
    elif head(cls.from_preset("tiny")).can_generate():
        lines += ["prompt = torch.tensor([[2, 17, 42, 9]])",
                  "print(model.generate(prompt, max_new_tokens=8, do_sample=False).shape)"]
    else:
        lines += ["output = model(input_ids=torch.tensor([[2, 17, 42, 9, 3]]))",
                  "print({name: tuple(value.shape) for name, value in output.items() if torch.is_tensor(value)})"]
    return "\n".join(lines) + "\n"


def run_example(code: str) -> str:
    """Run ``code`` in an empty temporary folder; its printed output. Whatever it raises propagates."""
    previous = os.getcwd()
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()) as out:
        os.chdir(folder)
        try:
            exec(compile(code, "<family page example>", "exec"), {"__name__": "__example__"})
        finally:
            os.chdir(previous)
    return out.getvalue()


def usage_section(family, execute: bool) -> list[str]:
    code = usage_example(family)
    lines = ["## Usage", "", "Executed when this page was built:", "", "```python", code.rstrip(), "```", ""]
    if execute:
        lines += ["Output:", "", "```text", run_example(code).rstrip(), "```", ""]
    return lines


# ------------------------------------------------------------------------------------------ results ----
def cards_of(model_type: str, cards_dir: Path = CARDS_DIR) -> list[Path]:
    """The model cards (folders of ``model_cards/``) whose front matter tags ``model_type``."""
    found = []
    for readme in sorted(cards_dir.glob("*/README.md")):
        front = readme.read_text(encoding="utf-8").split("---")
        if len(front) > 2 and re.search(rf"^- {re.escape(model_type)}$", front[1], flags=re.M):
            found.append(readme.parent)
    return found


def card_rows(text: str, section: str) -> dict[str, str]:
    """The two-column table of a card section (``## Evaluation``, ``## Model details``)."""
    match = re.search(rf"^## {section}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    rows = re.findall(r"^\| ([^|]+?) \| (.+?) \|$", match.group(1) if match else "", flags=re.M)
    return {key.strip(): value.strip() for key, value in rows if key.strip() and not set(key) <= {"-", " "}}


def results_section(family, cards_dir: Path = CARDS_DIR) -> tuple[list[str], dict[str, Path]]:
    cards = cards_of(family.config_class.model_type, cards_dir)
    if not cards:
        return [], {}
    lines = ["## Reproduction results", "",
             "The reference runs of `model_cards/` (scripts in `training/reproductions/`), as their cards report "
             "them.", ""]
    images = {}
    for card in cards:
        text = (card / "README.md").read_text(encoding="utf-8")
        details, results = card_rows(text, "Model details"), card_rows(text, "Evaluation")
        lines += [f"### {card.name}", "", details.get("Architecture", ""), ""]
        if results:
            lines += ["| Result | Value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in results.items()] + [""]
        for name in CARD_IMAGES:
            if (card / name).exists():
                target = f"models/cards/{card.name}/{name}"
                images[target] = card / name
                lines += [f"![{card.name}: {name.removesuffix('.png').replace('_', ' ')}](cards/{card.name}/{name})",
                          ""]
    return lines, images


# --------------------------------------------------------------------------------------------- page ----
def family_prose(model_type: str, prose_dir: Path = PROSE_DIR) -> str | None:
    path = prose_dir / f"{model_type}.md"
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def papers(family) -> str:
    from hf_seqmodels.registry import CELL_PAPERS

    entries = [family.citation.names] if family.citation else []
    if "cell_type" in {f.name for f in dataclasses.fields(family.config_class)}:
        entries += [paper.names for paper in CELL_PAPERS.values()]
    return "; ".join(entries)


def family_page(family, execute: bool = True, cards_dir: Path = CARDS_DIR, prose_dir: Path = PROSE_DIR) -> FamilyPage:
    """The page of ``family`` (a :class:`~hf_seqmodels.families.Family`)."""
    model_type = family.config_class.model_type
    problems = []
    prose = family_prose(model_type, prose_dir)
    if prose is None:
        problems.append(f"family {family.name!r} has no prose: write {prose_dir / (model_type + '.md')}")
    cited = papers(family)
    if not cited:
        problems.append(f"family {family.name!r} cites no paper: give its registry entry a citation")
    heads, generative = heads_section(family)
    results, images = results_section(family, cards_dir)
    lines = [f"# {family_title(family)}", "", prose or "", "", f"**Papers:** {cited or '—'}", "",
             f"Family `{family.name}` (`--model_family {family.name}` of the training scripts).", "",
             *heads, *config_section(family), *presets_section(family), *behaviour_section(family, generative),
             *usage_section(family, execute), *results]
    return FamilyPage(page_path(family), "\n".join(lines).rstrip() + "\n", images, problems)


def models_index(families) -> str:
    lines = ["# Models", "", "One page per model family of the registry (`hf_seqmodels/registry.py`), written from "
             "the code when the site is built.", "", "| Family | `model_type` | Heads | Presets |", "|---|---|---|---|"]
    for family in families:
        heads = ", ".join(f"`{m.__name__}`" for m in family.heads.values())
        presets = ", ".join(f"`{p}`" for p in family.config_class.available_presets())
        lines.append(f"| [{family_title(family)}]({family.name}.md) | `{family.config_class.model_type}` | {heads} "
                     f"| {presets} |")
    lines += ["", "Not Hugging Face model families, on their own pages: the [n-gram language model](../ngram.md) and "
              "the [word embeddings](../embeddings.md) (word2vec, GloVe, SVD)."]
    return "\n".join(lines) + "\n"


def all_family_pages(execute: bool = True) -> list[FamilyPage]:
    """The page of every family of the registry, in registry order."""
    from hf_seqmodels.registry import FAMILY_DESCRIPTIONS

    return [family_page(family, execute) for family in FAMILY_DESCRIPTIONS]
