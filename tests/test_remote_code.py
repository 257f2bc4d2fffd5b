"""Every head of every family, exported with its tokenizer, loads with ``Auto…from_pretrained(folder,
trust_remote_code=True)`` and ``AutoTokenizer`` in a fresh virtual environment that has torch and
transformers but not hf_seqmodels, and gives the same outputs and the same ``generate()`` tokens."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
import torch
from model_test_utils import run_in_python_without_package
from safetensors.torch import load_file, save_file

import hf_seqmodels  # noqa: F401  (registers the families)
from hf_seqmodels.registry import FAMILIES, family_of
from hf_seqmodels.tokenization import train_tokenizer

TEXT = "the cat sat on the mat .\nthe dog ran to the log .\na bird sang in the tree .\n" * 4
SENTENCE = "the cat ran to the tree ."
HEADS = [(config_class, auto_class, model_class) for config_class, heads in FAMILIES.items()
         for auto_class, model_class in heads.items()]


def export(config_class, model_class, folder, tmp_path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    bert = config_class.model_type == "hfsm_bert"
    tokenizer = train_tokenizer([str(corpus)], kind="word", vocab_size=64, min_frequency=1,
                                add_bert_special_tokens=bert)
    fields = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    if not bert:
        fields.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = model_class(family_of(config_class).tiny_config(**fields)).eval()  # the registry's tiny config
    if hasattr(model, "bind_tokenizer"):  # a model that reads the characters of its tokens
        model.bind_tokenizer(tokenizer)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def model_inputs(model, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if type(model).__name__.endswith("ForMultipleChoice"):
        inputs = {k: v[:, None].expand(-1, 2, -1) for k, v in inputs.items()}
    if model.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = input_ids[:, :3]
    return inputs


def outputs_of(model, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(**model_inputs(model, input_ids))
    return {k: v.contiguous() for k, v in out.items() if torch.is_tensor(v)}


def generations_of(model, input_ids: torch.Tensor) -> dict[str, list]:
    if not model.can_generate():
        return {}
    kw = dict(max_new_tokens=4, min_new_tokens=4)
    return {"greedy": model.generate(input_ids, do_sample=False, **kw).tolist(),
            "beam": model.generate(input_ids, num_beams=2, do_sample=False, **kw).tolist()}


@pytest.mark.slow
def test_every_head_loads_without_the_package_with_the_same_outputs_and_generations(tmp_path):
    jobs = []
    for i, (config_class, auto_class, model_class) in enumerate(HEADS):
        folder = tmp_path / f"{i}-{model_class.__name__}"
        export(config_class, model_class, folder, tmp_path)
        jobs.append({"folder": str(folder), "auto": auto_class.__name__, "out": str(tmp_path / f"{i}.safetensors")})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    helpers = "".join(textwrap.dedent(inspect.getsource(f)) + "\n"
                      for f in (model_inputs, outputs_of, generations_of))
    script = "import json, torch, transformers\nfrom safetensors.torch import save_file\n" + helpers + textwrap.dedent(
        f"""
        report = []
        for job in json.load(open("jobs.json")):
            model = getattr(transformers, job["auto"]).from_pretrained(job["folder"], trust_remote_code=True).eval()
            tokenizer = transformers.AutoTokenizer.from_pretrained(job["folder"], trust_remote_code=True)
            ids = tokenizer([{SENTENCE!r}], return_tensors="pt", add_special_tokens=False)["input_ids"]
            save_file(outputs_of(model, ids), job["out"])
            report.append({{"class": type(model).__name__, "module": type(model).__module__, "ids": ids.tolist(),
                           "generations": generations_of(model, ids)}})
        print(json.dumps(report))
        """)
    result = run_in_python_without_package(script, cwd=tmp_path, timeout=600)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report) == len(HEADS)
    for (_, auto_class, model_class), job, remote in zip(HEADS, jobs, report, strict=True):
        name = f"{auto_class.__name__} -> {model_class.__name__}"
        assert remote["class"] == model_class.__name__, name
        assert remote["module"].startswith("transformers_modules"), name
        model = auto_class.from_pretrained(job["folder"]).eval()
        ids = torch.tensor(remote["ids"])
        local = outputs_of(model, ids)
        loaded = load_file(job["out"])
        assert loaded.keys() == local.keys() and local, name
        for key in local:
            torch.testing.assert_close(loaded[key], local[key], msg=f"{name}: {key}")
        assert remote["generations"] == generations_of(model, ids), name
    generative = [r for r in report if r["generations"]]
    assert len(generative) >= 5  # NNLM, RNN, RNN seq2seq, Transformer and Transformer-LM heads generated


def test_the_outputs_compared_are_those_of_the_head(tmp_path):
    """The comparison above is not vacuous: a changed weight changes what it compares."""
    config_class, auto_class, model_class = next(h for h in HEADS if h[2].__name__ == "RNNForCausalLM")
    export(config_class, model_class, tmp_path / "m", tmp_path)
    model = auto_class.from_pretrained(tmp_path / "m").eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    before = outputs_of(model, ids)
    with torch.no_grad():
        model.lm_head.weight.add_(0.1)
    after = outputs_of(model, ids)
    assert not torch.allclose(before["logits"], after["logits"])
    save_file(before, str(tmp_path / "x.safetensors"))
    assert load_file(str(tmp_path / "x.safetensors")).keys() == {"logits"}
