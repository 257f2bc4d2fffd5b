"""Our pipelines shared with a saved model: ``custom_pipelines`` in ``config.json`` and the pipeline code
beside the model, so that ``pipeline("hfsm-translation", model=folder, trust_remote_code=True)`` and the
question-answering pipeline run in a Python process without the package, as transformers' custom pipelines do."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch
from model_test_utils import run_in_python_without_package
from transformers import pipeline
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
)
from hf_seqmodels import hub as hub_module
from hf_seqmodels.hub import save_for_hub
from hf_seqmodels.pipelines import (
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
from hf_seqmodels.tokenization import train_tokenizer

SEQ2SEQ_TASKS = {TRANSLATION_TASK: "TranslationPipeline", TEXT2TEXT_TASK: "Text2TextGenerationPipeline",
                 SUMMARIZATION_TASK: "SummarizationPipeline"}
QUESTION, CONTEXT = "who wrote the program ?", "ada wrote the first program near the river ."
# four tokens other than <pad>, <unk>, <bos> (ids 0-2), so that a tiny random model's output is never empty
GENERATE = {"max_new_tokens": 4, "min_new_tokens": 4, "suppress_tokens": [0, 1, 2]}


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
    assert SOURCE_TOKENIZER_FOLDER == hub_module.SOURCE_TOKENIZER_FOLDER


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
