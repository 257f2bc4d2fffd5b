"""The documentation site is written from the code: family pages from the registry, the API reference from the
public lists, the course map from ``docs/course_map.yml``; every link resolves.

The generators of ``docs/hooks/`` are called directly (a full ``mkdocs build --strict`` takes a minute or two:
``.ci/docs`` runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

import hf_seqmodels
import hf_seqmodels.ngram
from hf_seqmodels import RNNConfig, RNNForCausalLM, RNNModel, registry
from hf_seqmodels.families import Capabilities, Family

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import api_pages  # noqa: E402
import course_map  # noqa: E402
import family_pages  # noqa: E402
import link_check  # noqa: E402
import mkdocs_hooks  # noqa: E402


class ToyConfig(RNNConfig):
    """A configuration of a family that exists only in this test."""

    model_type = "hfsm_toy"
    PRESETS = {"tiny": dict(vocab_size=50, hidden_size=8, num_hidden_layers=1, embedding_size=8),
               "toy-large": dict(vocab_size=500, hidden_size=64, num_hidden_layers=2)}


class ToyModel(RNNModel):
    """The toy family's base model."""

    config_class = ToyConfig


class ToyForCausalLM(RNNForCausalLM):
    """The toy family's language model."""

    config_class = ToyConfig


TOY = Family(name="toy", config_class=ToyConfig, heads={AutoModel: ToyModel, AutoModelForCausalLM: ToyForCausalLM},
             hidden_states=lambda config: {"hidden_states": 2},
             capabilities=Capabilities(stateful_cache=True), recipe={"optim": "sgd", "learning_rate": 1.0})


@pytest.fixture
def toy_family(monkeypatch):
    """The toy family added to the registry and registered with the Auto classes (as ``register_all`` does)."""
    monkeypatch.setattr(registry, "FAMILY_DESCRIPTIONS", (*registry.FAMILY_DESCRIPTIONS, TOY))
    AutoConfig.register(ToyConfig.model_type, ToyConfig, exist_ok=True)
    for auto_class, model_class in TOY.heads.items():
        auto_class.register(ToyConfig, model_class, exist_ok=True)
    return TOY


# ---------------------------------------------------------------------------------------------- families ----
def test_a_registered_family_gets_its_page_and_its_nav_entry(toy_family, tmp_path):
    pages = {page.path: page for page in family_pages.all_family_pages(execute=False)}
    assert set(pages) == {f"models/{family.name}.md" for family in registry.FAMILY_DESCRIPTIONS}
    page = pages["models/toy.md"]
    text = page.markdown
    assert text.startswith("# Toy (`hfsm_toy`)")
    assert "| `AutoModelForCausalLM` | [`ToyForCausalLM`][hf_seqmodels.ToyForCausalLM] | `text-generation` | yes |" in text
    assert "| `toy-large` |" in text and "optim='sgd', learning_rate=1" in text  # presets with their recipes
    assert "| `cell_type` | `str` | `'lstm'` |" in text  # fields with types, defaults and ranges
    assert "| `hidden_dropout_prob` | `float | int` | `0.0` | [0, 1) |" in text
    assert "decoder-only: `decoder_with_past.onnx`" in text  # export support read from the export code
    assert "the cache is the model's state" in text
    assert any("has no prose" in problem for problem in page.problems)  # a build fails until a person writes it
    nav = mkdocs_hooks.generated_nav(ROOT / "docs")["Models"]
    assert {"Toy": "models/toy.md"} in nav


def test_a_family_page_shows_its_prose_and_the_output_of_its_executed_example(toy_family, tmp_path):
    (tmp_path / "hfsm_toy.md").write_text("A toy family: *one* recurrent layer.\n")
    page = family_pages.family_page(toy_family, execute=True, prose_dir=tmp_path)
    assert page.problems == []
    assert "A toy family: *one* recurrent layer." in page.markdown
    assert 'config = ToyConfig.from_preset("tiny")' in page.markdown
    assert "Output:" in page.markdown and "torch.Size([1, 12])\n```" in page.markdown  # 4 + 8 new tokens, when built


def test_an_example_that_raises_stops_the_page(toy_family, monkeypatch, tmp_path):
    monkeypatch.setattr(family_pages, "usage_example", lambda family: "raise RuntimeError('broken example')\n")
    with pytest.raises(RuntimeError, match="broken example"):
        family_pages.family_page(toy_family, execute=True, prose_dir=tmp_path)


def test_every_family_of_the_package_has_prose_and_papers():
    problems = [problem for family in registry.FAMILY_DESCRIPTIONS
                for problem in family_pages.family_page(family, execute=False).problems]
    assert problems == []


def test_results_come_from_the_model_cards_of_the_family(tmp_path):
    card = tmp_path / "my-card"
    card.mkdir()
    (card / "README.md").write_text("---\ntags:\n- hf_seqmodels\n- hfsm_rnn\n---\n\n## Model details\n\n| | |\n"
                                    "|---|---|\n| Architecture | 1-layer GRU |\n\n## Evaluation\n\n| | |\n|---|---|\n"
                                    "| eval_loss | 1.234 |\n\n## Citation\n")
    (card / "loss_curve.png").write_bytes(b"png")
    lines, images = family_pages.results_section(registry.family_named("rnn"), cards_dir=tmp_path)
    assert "### my-card" in lines and "1-layer GRU" in lines and "| eval_loss | 1.234 |" in lines
    assert images == {"models/cards/my-card/loss_curve.png": card / "loss_curve.png"}
    assert family_pages.results_section(registry.family_named("bert"), cards_dir=tmp_path) == ([], {})


def test_tutorial_scripts_join_the_nav_and_are_executed_strictly(tmp_path):
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "tutorials" / "02_second.py").write_text("# %% [markdown]\n# # 2. The second one\n")
    (tmp_path / "tutorials" / "01_first_steps.py").write_text("# %%\nprint(1)\n")
    assert mkdocs_hooks.generated_nav(tmp_path)["Tutorials"] == [{"First steps": "tutorials/01_first_steps.py"},
                                                                 {"2. The second one": "tutorials/02_second.py"}]
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert 'include: ["tutorials/*.py"]' in config and "execute: true" in config and "allow_errors: false" in config


def test_a_tutorial_toc_points_at_the_ids_of_its_headings():
    from mkdocs.structure.toc import AnchorLink

    top, sub = AnchorLink("4. BERT, then `Trainer`", "4-bert-then", 1), AnchorLink("Data", "data", 2)
    top.children.append(sub)
    html = '<h1 id="4-bert-then-trainer">4. BERT</h1><p id="x"></p><h2 id="data">Data</h2>'
    mkdocs_hooks.align_toc([top], html)
    assert (top.url, sub.url) == ("#4-bert-then-trainer", "#data")


# ---------------------------------------------------------------------------------------------------- API ----
def test_every_public_class_and_function_has_a_docstring():
    assert api_pages.undocumented() == []


def test_the_api_pages_document_every_public_name():
    for page, entries in api_pages.surface().items():
        text = api_pages.api_page(page)
        assert entries and all(f"::: {path}\n" in text for path, _ in entries), page
    names = {path for path, _ in api_pages.surface()["models"]}
    assert {f"hf_seqmodels.{name}" for name in hf_seqmodels.__all__ if name != "__version__"} == names


def test_an_undocumented_public_function_is_listed(monkeypatch):
    def helper():
        pass

    monkeypatch.setattr(hf_seqmodels.ngram, "__all__", [*hf_seqmodels.ngram.__all__, "helper"])
    monkeypatch.setattr(hf_seqmodels.ngram, "helper", helper, raising=False)
    assert api_pages.undocumented() == ["hf_seqmodels.ngram.helper"]


# ---------------------------------------------------------------------------------------------- course map ----
def test_the_course_map_names_only_pages_code_and_tests_that_exist():
    assert course_map.problems() == []
    topics = " ".join(entry["topic"] for entry in course_map.entries())
    for section in ("Recurrent", "LSTM", "Sequence to sequence", "Attention", "Transformer", "BERT", "neural "
                    "probabilistic", "word2vec", "GloVe", "CNNs for text", "n-gram", "CRF"):
        assert section in topics, section


def test_the_course_map_check_finds_what_is_missing(tmp_path):
    bad = tmp_path / "map.yml"
    bad.write_text("- topic: Broken\n  notes: []\n  pages: [models/nope.md]\n"
                   "  code: [hf_seqmodels.models.crf.NoSuchClass]\n"
                   "  tests: [tests/test_crf.py::test_no_such_test, tests/test_nowhere.py]\n")
    problems = course_map.problems(bad)
    assert len(problems) == 4 and all(problem.startswith("Broken: ") for problem in problems)


# ---------------------------------------------------------------------------------------------------- links ----
def test_readme_links_resolve_and_every_family_is_linked():
    assert link_check.markdown_problems(ROOT / "README.md") == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for family in registry.FAMILY_DESCRIPTIONS:
        assert f"/models/{family.name}/)" in readme, family.name
    assert len(readme.splitlines()) <= 200


def test_markdown_link_check_finds_missing_files_and_malformed_addresses(tmp_path):
    page = tmp_path / "README.md"
    page.write_text("[ok](README.md) [gone](docs/gone.md) [web](https://example.org/x) [bad](https://nodot/x)\n"
                    "```\n[in code](ignored.md)\n```\n")
    assert link_check.markdown_problems(page) == ["README.md: 'docs/gone.md' points to a missing file",
                                                  "README.md: malformed address 'https://nodot/x'"]


def test_site_link_check_finds_missing_pages_and_anchors(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a><a href="../b/#there">'
                                               'ok</a><a href="../b/#nowhere">bad</a><a href="../c/">gone</a>')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<p id="there"></p><a href="https://example.org">web</a>'
                                               '<img src="data:image/png;base64,iVBORw0KGgo=">')
    assert link_check.site_problems(tmp_path) == ["/a/index.html: '../b/#nowhere' points to a missing anchor",
                                                  "/a/index.html: '../c/' points to a missing file"]


def test_the_docs_extra_and_the_ci_script_build_the_site_strictly():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = next(line for line in pyproject.splitlines() if line.startswith("docs = "))
    assert all(name in extra for name in ("mkdocs-material", "mkdocstrings[python]", "mkdocs-jupyter"))
    script = (ROOT / ".ci" / "docs").read_text(encoding="utf-8")
    assert 'pip install -e ".[docs]"' in script and "mkdocs build --strict" in script and "link_check.py" in script
