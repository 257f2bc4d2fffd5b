"""Our pipelines shared with a saved model: ``custom_pipelines`` in ``config.json`` and the pipeline code
beside the model, so that ``pipeline("hfsm-translation", model=folder, trust_remote_code=True)`` and the
question-answering pipeline run in a Python process without the package, as transformers' custom pipelines do."""

from __future__ import annotations

import copy
import inspect
import json
import logging
import textwrap

import pytest
import torch
from model_test_utils import run_in_python_without_package
from transformers import AutoModelForSeq2SeqLM, Trainer, TrainingArguments, pipeline
from transformers.dynamic_module_utils import get_relative_imports

import hf_seqmodels  # noqa: F401  (registers the Auto classes and the pipelines)
from hf_seqmodels import (
    BertConfig,
    BertForMaskedLM,
    BertForQuestionAnswering,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    TransformerConfig,
    TransformerForConditionalGeneration,
    TransformerModel,
    cards,
)
from hf_seqmodels.cards import save_for_hub
from hf_seqmodels.pipelines import (
    PIPELINE_TASKS,
    QUESTION_ANSWERING_TASK,
    SOURCE_TOKENIZER_FOLDER,
    SUMMARIZATION_TASK,
    TEXT2TEXT_TASK,
    TRANSLATION_TASK,
    QuestionAnsweringPipeline,
    TranslationPipeline,
    custom_pipelines_for,
    save_pipelines,
)
from hf_seqmodels.registry import FAMILIES, family_of
from hf_seqmodels.tokenization import train_tokenizer

SEQ2SEQ_TASKS = {TRANSLATION_TASK: "TranslationPipeline", TEXT2TEXT_TASK: "Text2TextGenerationPipeline",
                 SUMMARIZATION_TASK: "SummarizationPipeline"}
QUESTION, CONTEXT = "who wrote the program ?", "ada wrote the first program near the river ."
# four tokens other than <pad>, <unk>, <bos> (ids 0-2), so that a tiny random model's output is never empty
GENERATE = {"max_new_tokens": 4, "min_new_tokens": 4, "suppress_tokens": [0, 1, 2]}
#: ``(config class, model class, tasks)`` for every head of the registry that a pipeline of ours runs
PIPELINE_HEADS = [
    (config_class, model_class, sorted(task for task, (_, auto_class) in PIPELINE_TASKS.items()
                                       if heads.get(auto_class) is model_class))
    for config_class, heads in FAMILIES.items() for model_class in heads.values()
    if any(heads.get(auto_class) is model_class for _, auto_class in PIPELINE_TASKS.values())
]


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("the cat sat on the mat\nle chat est sur le tapis\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], kind="word", vocab_size=40, min_frequency=1)
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.bos_token_id] == GENERATE["suppress_tokens"]
    return tokenizer


@pytest.fixture(scope="module")
def bert_tokenizer(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text(f"{QUESTION}\n{CONTEXT}\nthe house stood on the hill .\n", encoding="utf-8")
    return train_tokenizer([corpus], kind="wordpiece", vocab_size=80, min_frequency=1,
                           add_bert_special_tokens=True, model_max_length=64)


def transformer_seq2seq(tokenizer, model_class=TransformerForConditionalGeneration):
    torch.manual_seed(0)
    config = TransformerConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return model_class(config).eval()


def rnn_seq2seq(tokenizer):
    torch.manual_seed(1)
    config = RNNSeq2SeqConfig.from_preset("tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    return RNNSeq2SeqForConditionalGeneration(config).eval()


def bert(tokenizer, model_class=BertForQuestionAnswering):
    torch.manual_seed(2)
    return model_class(BertConfig.from_preset("tiny", vocab_size=len(tokenizer))).eval()


def saved_config(folder):
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))


def test_save_for_hub_declares_the_pipelines_of_the_saved_head(word_tokenizer, bert_tokenizer, tmp_path):
    cases = [
        (transformer_seq2seq(word_tokenizer), word_tokenizer, set(SEQ2SEQ_TASKS)),
        (rnn_seq2seq(word_tokenizer), word_tokenizer, set(SEQ2SEQ_TASKS)),
        (bert(bert_tokenizer), bert_tokenizer, {QUESTION_ANSWERING_TASK}),
        # heads that no pipeline of ours runs: nothing declared, no pipeline code copied
        (transformer_seq2seq(word_tokenizer, TransformerModel), word_tokenizer, set()),
        (bert(bert_tokenizer, BertForMaskedLM), bert_tokenizer, set()),
    ]
    for i, (model, tokenizer, tasks) in enumerate(cases):
        folder = save_for_hub(tmp_path / str(i), model, tokenizer)
        declared = saved_config(folder).get("custom_pipelines", {})
        assert set(declared) == tasks, type(model).__name__
        assert (folder / "pipelines.py").is_file() == bool(tasks)
        for task, entry in declared.items():
            expected_class = SEQ2SEQ_TASKS.get(task, "QuestionAnsweringPipeline")
            auto_class = "AutoModelForQuestionAnswering" if task == QUESTION_ANSWERING_TASK else "AutoModelForSeq2SeqLM"
            assert entry == {"impl": f"pipelines.{expected_class}", "pt": [auto_class], "type": "text"}
        if tasks:  # the flat-folder rule: the pipeline code imports only sibling modules present in the folder
            siblings = get_relative_imports(str(folder / "pipelines.py"))
            assert siblings == ["qa_spans"] and all((folder / f"{name}.py").is_file() for name in siblings)
    assert custom_pipelines_for(transformer_seq2seq(word_tokenizer)) == saved_config(tmp_path / "0")["custom_pipelines"]
    assert SOURCE_TOKENIZER_FOLDER == cards.SOURCE_TOKENIZER_FOLDER


def test_every_save_declares_the_pipelines_of_the_saved_head_as_a_dict_keyed_by_task(bert_tokenizer, tmp_path):
    """The entries are computed for the head saved: an earlier non-dict value is replaced, our tasks that do not
    run the head are dropped, other tasks are kept, and none at all writes no ``custom_pipelines``; the config in
    memory is left as it was."""
    qa = bert(bert_tokenizer)
    qa.config.custom_pipelines = []
    qa.save_pretrained(tmp_path / "qa")
    assert saved_config(tmp_path / "qa")["custom_pipelines"] == custom_pipelines_for(qa) != {}
    assert qa.config.custom_pipelines == []
    other = {"my-task": {"impl": "my_pipelines.MyPipeline", "pt": ["AutoModelForMaskedLM"], "type": "text"}}
    masked_lm = BertForMaskedLM(qa.config)
    masked_lm.config.custom_pipelines = {**custom_pipelines_for(qa), **other}
    masked_lm.save_pretrained(tmp_path / "masked-lm")
    assert saved_config(tmp_path / "masked-lm")["custom_pipelines"] == other
    assert not (tmp_path / "masked-lm" / "pipelines.py").exists()
    masked_lm.config.custom_pipelines = custom_pipelines_for(qa)
    masked_lm.save_pretrained(tmp_path / "masked-lm")
    assert "custom_pipelines" not in saved_config(tmp_path / "masked-lm")


def test_save_pipelines_refuses_a_folder_without_config(word_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="save_directory=.*has no config.json"):
        save_pipelines(transformer_seq2seq(word_tokenizer), tmp_path)


def test_pipelines_of_a_shared_folder_run_without_the_package(word_tokenizer, bert_tokenizer, tmp_path):
    models = {"transformer": transformer_seq2seq(word_tokenizer), "rnn": rnn_seq2seq(word_tokenizer)}
    for name, model in models.items():
        save_for_hub(tmp_path / name, model, word_tokenizer)
    save_for_hub(tmp_path / "qa", bert(bert_tokenizer), bert_tokenizer)
    expected = {}
    for name in models:
        for task in SEQ2SEQ_TASKS:
            expected[f"{name} {task}"] = pipeline(task, model=str(tmp_path / name), trust_remote_code=True)(
                ["the cat sat", "on the mat"], **GENERATE)
    qa = pipeline(QUESTION_ANSWERING_TASK, model=str(tmp_path / "qa"), trust_remote_code=True)
    expected["qa"] = qa(question=QUESTION, context=CONTEXT, top_k=2)
    script = textwrap.dedent(f"""
        import json
        from transformers import pipeline
        results, classes = {{}}, {{}}
        for name in {list(models)!r}:
            for task in {list(SEQ2SEQ_TASKS)!r}:
                pipe = pipeline(task, model=name, trust_remote_code=True)
                results[f"{{name}} {{task}}"] = pipe(["the cat sat", "on the mat"], **{GENERATE!r})
                classes[task] = type(pipe).__module__ + "." + type(pipe).__name__
        qa = pipeline({QUESTION_ANSWERING_TASK!r}, model="qa", trust_remote_code=True)
        results["qa"] = qa(question={QUESTION!r}, context={CONTEXT!r}, top_k=2)
        classes["qa"] = type(qa).__module__ + "." + type(qa).__name__
        print(json.dumps({{"results": results, "classes": classes}}))
        """)
    report = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    for task, class_name in SEQ2SEQ_TASKS.items():
        assert report["classes"][task].startswith("transformers_modules.")
        assert report["classes"][task].endswith(f".pipelines.{class_name}")
    assert report["classes"]["qa"].endswith(".pipelines.QuestionAnsweringPipeline")
    output_keys = {TRANSLATION_TASK: "translation_text", TEXT2TEXT_TASK: "generated_text",
                   SUMMARIZATION_TASK: "summary_text"}
    for key, outputs in expected.items():
        if key != "qa":
            task = key.split(" ", 1)[1]
            assert [[set(answer) for answer in row] for row in outputs] == [[{output_keys[task]}]] * 2
            assert all(len(row[0][output_keys[task]].split()) == 4 for row in outputs)
    assert report["results"]["qa"][0]["answer"] == expected["qa"][0]["answer"]
    assert report["results"]["qa"][0]["score"] == pytest.approx(expected["qa"][0]["score"], abs=1e-5)
    report["results"]["qa"] = expected["qa"] = None  # compared above (scores within float tolerance)
    assert report["results"] == expected


def test_shared_folder_asks_for_trust_remote_code_with_the_package_too(word_tokenizer, tmp_path):
    """transformers runs a folder's own pipeline code only with trust_remote_code=True, installed package or not."""
    folder = save_for_hub(tmp_path, transformer_seq2seq(word_tokenizer), word_tokenizer)
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline(TRANSLATION_TASK, model=str(folder))
    shared = pipeline(TRANSLATION_TASK, model=str(folder), trust_remote_code=True)
    assert type(shared).__module__.startswith("transformers_modules.")  # the folder's copy of the code
    ours = pipeline(TRANSLATION_TASK, model=str(folder), pipeline_class=TranslationPipeline)
    assert len(ours("the cat sat", **GENERATE)[0]["translation_text"].split()) == 4
    assert shared(["the cat sat", "on the mat"], **GENERATE) == ours(["the cat sat", "on the mat"], **GENERATE)


def test_a_registered_pipeline_saves_itself_for_sharing(bert_tokenizer, tmp_path):
    """transformers' Pipeline.save_pretrained of our registered QA pipeline writes its task and code."""
    qa = pipeline(QUESTION_ANSWERING_TASK, model=bert(bert_tokenizer), tokenizer=bert_tokenizer)
    assert isinstance(qa, QuestionAnsweringPipeline)  # a model object, not a folder: the package's class
    qa.save_pretrained(tmp_path / "shared")
    assert set(saved_config(tmp_path / "shared")["custom_pipelines"]) == {QUESTION_ANSWERING_TASK}
    assert {"pipelines.py", "qa_spans.py"} <= {p.name for p in (tmp_path / "shared").iterdir()}
    expected = qa(question=QUESTION, context=CONTEXT)
    script = textwrap.dedent(f"""
        import json
        from transformers import pipeline
        qa = pipeline({QUESTION_ANSWERING_TASK!r}, model="shared", trust_remote_code=True)
        print(json.dumps(qa(question={QUESTION!r}, context={CONTEXT!r})))
        """)
    answer = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert answer["answer"] == expected["answer"] and answer["score"] == pytest.approx(expected["score"], abs=1e-5)


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_feature_extraction_of_an_encoder_decoder_gives_the_encoder_states(family, word_tokenizer, tmp_path):
    from hf_seqmodels import RNNSeq2SeqModel

    config = (transformer_seq2seq if family == "transformer" else rnn_seq2seq)(word_tokenizer).config
    model = (TransformerModel if family == "transformer" else RNNSeq2SeqModel)(config).eval()
    model.save_pretrained(tmp_path)
    word_tokenizer.save_pretrained(tmp_path)
    features = pipeline("feature-extraction", model=str(tmp_path))("the cat sat", return_tensors=True)
    encoded = word_tokenizer("the cat sat", return_tensors="pt")
    with torch.no_grad():
        encoder_states = model.get_encoder()(encoded["input_ids"], encoded["attention_mask"]).last_hidden_state
    torch.testing.assert_close(features, encoder_states)  # (1, S, H)


def run_pipeline(pipe, task: str):
    """What the tests ask of a pipeline of ``task`` (transformers only: also run without the package)."""
    if task == "hfsm-question-answering":
        answer = pipe(question="who wrote the program ?", context="ada wrote the first program near the river .")
        return {**answer, "score": round(answer["score"], 5)}
    return pipe(["the cat sat", "on the mat"], max_new_tokens=4, min_new_tokens=4, suppress_tokens=[0, 1, 2])


def test_trainer_save_model_writes_folders_whose_pipelines_run_without_the_package(word_tokenizer, bert_tokenizer,
                                                                                    tmp_path):
    """``Trainer.save_model`` (transformers' own save, as in run_translation.py and run_qa.py) of every head that a
    pipeline of ours runs writes its tasks and the pipeline code: each task runs from the folder by name, with
    ``trust_remote_code=True``, where the package cannot be imported, as our pipeline runs on the model itself."""
    assert {(model_class.__name__, task) for _, model_class, tasks in PIPELINE_HEADS for task in tasks} >= {
        ("TransformerForConditionalGeneration", TRANSLATION_TASK), ("RNNSeq2SeqForConditionalGeneration", TEXT2TEXT_TASK),
        ("BertForQuestionAnswering", QUESTION_ANSWERING_TASK)}
    expected, jobs = {}, []
    for config_class, model_class, tasks in PIPELINE_HEADS:
        tokenizer = bert_tokenizer if config_class is BertConfig else word_tokenizer
        torch.manual_seed(0)
        config = family_of(config_class).tiny_config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
        model = model_class(config)
        folder = tmp_path / model_class.__name__
        args = TrainingArguments(output_dir=str(folder), use_cpu=True, report_to="none")
        Trainer(model=model, args=args, processing_class=tokenizer).save_model()
        declared = saved_config(folder)["custom_pipelines"]
        assert sorted(declared) == tasks and all(declared[task]["impl"].startswith("pipelines.") for task in tasks)
        assert {"pipelines.py", "qa_spans.py"} <= {p.name for p in folder.iterdir()}
        model.eval()
        for task in tasks:
            expected[f"{folder.name} {task}"] = run_pipeline(pipeline(task, model=model, tokenizer=tokenizer), task)
            jobs.append([folder.name, task])
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    script = "import json\nfrom transformers import pipeline\n" + textwrap.dedent(inspect.getsource(run_pipeline)) + \
        textwrap.dedent("""
        results, modules = {}, set()
        for folder, task in json.load(open("jobs.json")):
            pipe = pipeline(task, model=folder, trust_remote_code=True)
            modules.add(type(pipe).__module__)
            results[f"{folder} {task}"] = run_pipeline(pipe, task)
        print(json.dumps({"results": results, "modules": sorted(modules)}))
        """)
    report = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert report["modules"] and all(m.startswith("transformers_modules.") for m in report["modules"])
    assert report["results"] == json.loads(json.dumps(expected))
    assert all(len(row[0][key].split()) == 4 for name, rows in expected.items() if QUESTION_ANSWERING_TASK not in name
               for row in rows for key in row[0])


def test_an_encoder_decoder_saved_with_a_tokenizer_that_adds_no_eos_warns_once(word_tokenizer, bert_tokenizer,
                                                                              tmp_path, caplog):
    """A tokenizer with the causal template ``<bos> A`` never ends labels with ``<eos>``: a seq2seq model saved with
    it warns once, naming the fix; the fixed tokenizer, and a model that is no encoder-decoder, do not warn."""
    eos = word_tokenizer.eos_token_id
    assert word_tokenizer(text_target="the cat")["input_ids"][-1] != eos  # <bos> A
    model = transformer_seq2seq(word_tokenizer)
    with caplog.at_level(logging.WARNING, logger="hf_seqmodels"):
        save_for_hub(tmp_path / "causal", model, word_tokenizer)
        model.save_pretrained(tmp_path / "causal")  # the same tokenizer again
    message = one_eos_warning(caplog)
    assert str(tmp_path / "causal" / "tokenizer.json") in message and "TransformerForConditionalGeneration" in message
    assert "tokenizer.add_bos_token = False and tokenizer.add_eos_token = True" in message
    assert "--add_bos_token false --add_eos_token true" in message

    # Trainer.save_model writes the tokenizer after the model: the one of the folder the model came from is checked
    model.save_pretrained(tmp_path / "source")
    word_tokenizer.save_pretrained(tmp_path / "source")
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "source")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_seqmodels"):
        args = TrainingArguments(output_dir=str(tmp_path / "trained"), use_cpu=True, report_to="none")
        Trainer(model=loaded, args=args, processing_class=word_tokenizer).save_model()
    assert str(tmp_path / "source" / "tokenizer.json") in one_eos_warning(caplog)

    caplog.clear()
    fixed = copy.deepcopy(word_tokenizer)
    fixed.add_bos_token, fixed.add_eos_token = False, True  # the fix the warning names
    assert fixed(text_target="the cat")["input_ids"][-1] == eos
    with caplog.at_level(logging.WARNING, logger="hf_seqmodels"):
        save_for_hub(tmp_path / "fixed", model, fixed)
        save_for_hub(tmp_path / "qa", bert(bert_tokenizer), bert_tokenizer)  # [CLS] A [SEP]: not a seq2seq model
        model.save_pretrained(tmp_path / "no-tokenizer")
        (tmp_path / "unreadable").mkdir()
        (tmp_path / "unreadable" / "tokenizer.json").write_text("{}")
        model.save_pretrained(tmp_path / "unreadable")  # a tokenizer file the check cannot read: saved all the same
    assert not [r for r in caplog.records if r.name == "hf_seqmodels.saved_folders"]
    assert (tmp_path / "unreadable" / "model.safetensors").is_file()


def one_eos_warning(caplog) -> str:
    warnings = [r.getMessage() for r in caplog.records if r.name == "hf_seqmodels.saved_folders"]
    assert len(warnings) == 1, warnings
    return warnings[0]


def test_a_model_loaded_without_the_package_and_saved_again_keeps_its_pipelines(word_tokenizer, tmp_path):
    """As transformers' run_translation.py does where the package is not installed: the model is loaded with
    ``trust_remote_code=True`` and saved by ``Trainer.save_model``; the saved folder's pipelines still run by name."""
    save_for_hub(tmp_path / "shared", transformer_seq2seq(word_tokenizer), word_tokenizer)
    script = textwrap.dedent(f"""
        import json
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, Trainer, TrainingArguments, pipeline
        model = AutoModelForSeq2SeqLM.from_pretrained("shared", trust_remote_code=True)
        args = TrainingArguments(output_dir="trained", use_cpu=True, report_to="none")
        Trainer(model=model, args=args, processing_class=AutoTokenizer.from_pretrained("shared")).save_model()
        translate = pipeline({TRANSLATION_TASK!r}, model="trained", trust_remote_code=True)
        print(json.dumps(translate(["the cat sat", "on the mat"], **{GENERATE!r})))
        """)
    remote = json.loads(run_in_python_without_package(script, cwd=tmp_path).stdout.strip().splitlines()[-1])
    trained = tmp_path / "trained"
    assert saved_config(trained)["custom_pipelines"] == saved_config(tmp_path / "shared")["custom_pipelines"]
    assert {"pipelines.py", "qa_spans.py"} <= {p.name for p in trained.iterdir()}
    shared = pipeline(TRANSLATION_TASK, model=str(tmp_path / "shared"), trust_remote_code=True)
    assert remote == shared(["the cat sat", "on the mat"], **GENERATE)
