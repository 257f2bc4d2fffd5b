"""Auto-class contract (defect 10): every head in its transformers task mapping, every family's base model
under ``AutoModel``, loading from any head's folder, with the package and through ``trust_remote_code=True``
on a machine without it."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
from conformance_harness import ALL_CASES, HeadCase, cases, family_cases, main_output
from model_test_utils import run_in_python_without_package
from transformers import AutoConfig, AutoModel

from hf_seqmodels.families import Family


@pytest.mark.parametrize("case", cases("auto_task_mapping"))
def test_every_head_sits_in_its_transformers_task_mapping(case: HeadCase):
    assert case.auto_class._model_mapping[case.family.config_class] is case.model_class
    assert AutoConfig.for_model(case.family.config_class.model_type).__class__ is case.family.config_class
    assert type(case.auto_class.from_config(case.config())) is case.model_class


@pytest.mark.parametrize("family", family_cases("auto_model_base"))
def test_every_family_has_a_base_model_under_auto_model(family: Family):
    assert family.capabilities.has_base_model == (AutoModel in family.heads)
    assert AutoModel in family.heads, f"{family.name}: no base model class mapped to AutoModel"


@pytest.mark.parametrize("case", cases("auto_class_loads_head"))
def test_the_auto_class_loads_the_head_from_its_folder(case: HeadCase, tmp_path):
    model = case.model()
    model.save_pretrained(tmp_path)
    assert set(json.loads((tmp_path / "config.json").read_text())["auto_map"]) == {
        "AutoConfig", *(auto.__name__ for auto in case.family.heads)}
    loaded = case.auto_class.from_pretrained(tmp_path).eval()
    assert type(loaded) is case.model_class
    inputs = case.inputs(model.config)
    with torch.no_grad():
        torch.testing.assert_close(main_output(loaded(**inputs)), main_output(model(**inputs)))


@pytest.mark.parametrize("case", cases("auto_model_loads_base", lambda c: not c.is_base))
def test_auto_model_loads_the_base_model_from_a_head_folder(case: HeadCase, tmp_path):
    """The head's body comes back as the family's base model, without missing weights (transformers strips
    ``base_model_prefix``), and computes what the head's body computes."""
    model = case.model()
    model.save_pretrained(tmp_path)
    base, info = AutoModel.from_pretrained(tmp_path, output_loading_info=True)
    assert type(base) is case.family.heads.get(AutoModel), type(base)
    body = getattr(model, model.base_model_prefix)
    not_in_head = set(base.state_dict()) - set(body.state_dict())  # e.g. BERT's pooler, absent from MLM heads
    assert set(info["missing_keys"]) <= not_in_head, info
    inputs = case.inputs(model.config, labels=False)
    if inputs["input_ids"].dim() == 3:  # multiple choice (batch, choices, time): one row per choice
        inputs = {k: v.flatten(0, 1) for k, v in inputs.items()}
    with torch.no_grad():
        expected = body(**inputs, return_dict=True).last_hidden_state
        torch.testing.assert_close(base.eval()(**inputs).last_hidden_state, expected)


# ------------------------------------------------------------------------- without the package ----

REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, transformers
    report = {}
    for job in json.load(open("jobs.json")):
        config = transformers.AutoConfig.from_pretrained(job["folder"], trust_remote_code=True)
        for auto_name in sorted(config.auto_map):
            if auto_name == "AutoConfig":
                continue
            try:
                model = getattr(transformers, auto_name).from_pretrained(job["folder"], trust_remote_code=True)
                report[job["head"] + ":" + auto_name] = [type(model).__name__, type(model).__module__]
            except Exception as error:
                report[job["head"] + ":" + auto_name] = ["error", repr(error)[:300]]
    print(json.dumps(report))
    """)


@pytest.fixture(scope="module")
def remote_report(tmp_path_factory) -> dict[str, list[str]]:
    """Every head's folder loaded in a fresh environment without hf_seqmodels through each Auto class of its
    family's ``auto_map``: ``{"Head:AutoClass": [class name, module]}`` (or ``["error", message]``)."""
    root = tmp_path_factory.mktemp("remote")
    jobs = []
    for case in ALL_CASES:
        folder = root / case.name
        case.model().save_pretrained(folder)
        jobs.append({"folder": str(folder), "head": case.name})
    (root / "jobs.json").write_text(json.dumps(jobs))
    result = run_in_python_without_package(REMOTE_SCRIPT, cwd=root, timeout=600)
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("case", cases("remote_code_auto_classes"))
def test_without_the_package_every_auto_class_of_the_family_loads_its_class(case: HeadCase, remote_report):
    for auto_class, model_class in case.family.heads.items():
        if auto_class is not AutoModel and model_class is not case.model_class and not case.is_base:
            continue  # a head's folder must load as itself and as the base model; the base folder as any head
        loaded = remote_report[f"{case.name}:{auto_class.__name__}"]
        assert loaded[0] == model_class.__name__, loaded
        assert loaded[1].startswith("transformers_modules"), loaded


@pytest.mark.slow
@pytest.mark.parametrize("family", family_cases("remote_code_auto_model"))
def test_without_the_package_auto_model_loads_every_family(family: Family, remote_report):
    heads = [case for case in ALL_CASES if case.family is family]
    for case in heads:
        assert f"{case.name}:AutoModel" in remote_report, f"{case.name}: AutoModel missing from its auto_map"
