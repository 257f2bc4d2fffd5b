"""sacreBLEU corpus BLEU as an ``evaluate`` metric module that loads from this folder, without the Hub.

    import evaluate
    from hf_seqmodels.metrics import metric_path
    bleu = evaluate.load(metric_path("hfsm_sacrebleu"))
    bleu.compute(predictions=["Ein Hund läuft."], references=[["Ein Hund rennt."]])  # {"score": ..., ...}

``references`` holds one list of reference translations per prediction (all lists the same length).
The score is sacreBLEU's default: 13a tokenisation of detokenised text, exponential smoothing off.
"""

import datasets
import evaluate
import sacrebleu

_CITATION = """@inproceedings{post-2018-call,
  title={A Call for Clarity in Reporting {BLEU} Scores},
  author={Post, Matt},
  booktitle={Proceedings of the Third Conference on Machine Translation},
  year={2018}
}"""


class HfsmSacrebleu(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus BLEU of detokenised text computed by sacreBLEU (13a tokenisation).",
            citation=_CITATION,
            inputs_description="predictions: list of str; references: list of lists of str, one list per prediction.",
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Sequence(datasets.Value("string"))}),
        )

    def _compute(self, predictions, references):
        counts = {len(r) for r in references}
        if len(counts) != 1:
            raise ValueError(f"Every prediction needs the same number of references, got {sorted(counts)}.")
        streams = [list(stream) for stream in zip(*references, strict=True)]  # one stream per reference
        result = sacrebleu.corpus_bleu(predictions, streams)
        return {"score": result.score, "precisions": result.precisions, "brevity_penalty": result.bp,
                "sys_len": result.sys_len, "ref_len": result.ref_len}
