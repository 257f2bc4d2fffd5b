"""Every model family of the package, and its registration with the transformers Auto classes.

Each family is one :class:`~hf_seqmodels.families.Family` of ``FAMILY_DESCRIPTIONS``: its configuration
class, the model class for each Auto class, its tiny config, the kind of inputs its models take, its
capabilities, its papers and architecture sentence (for its model cards) and its training recipes
(:func:`training_recipe`); ``FAMILIES`` is the ``{config class: {Auto class: model class}}`` view of them.
:func:`register_all` (run by ``import hf_seqmodels``) registers them locally, marks every
class for the Hub (so ``save_pretrained`` copies the code) and gives each config class the
``auto_map`` of *all* heads of its family, so that ``trust_remote_code=True`` finds any head.
:func:`register_family` adds a family defined elsewhere: everything that reads the registry (Auto classes,
model cards, export, the training scripts' family choices, the conformance tests) then finds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForNextSentencePrediction,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .families import Capabilities, Citation, Family
from .models import (
    BertConfig,
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BiLSTMCRFConfig,
    BiLSTMCRFForTokenClassification,
    BiLSTMCRFModel,
    NNLMConfig,
    NNLMForCausalLM,
    NNLMModel,
    RNNConfig,
    RNNForCausalLM,
    RNNForSequenceClassification,
    RNNForTokenClassification,
    RNNModel,
    RNNSeq2SeqConfig,
    RNNSeq2SeqForConditionalGeneration,
    RNNSeq2SeqModel,
    TextCNNConfig,
    TextCNNForSequenceClassification,
    TextCNNModel,
    TransformerConfig,
    TransformerForCausalLM,
    TransformerForConditionalGeneration,
    TransformerLMConfig,
    TransformerLMModel,
    TransformerModel,
)


def _recurrent_layers(config) -> dict[str, int]:
    return {"hidden_states": config.num_hidden_layers + 1}


def _seq2seq_stacks(config) -> dict[str, int]:
    return {"encoder_hidden_states": config.encoder_layers + 1, "decoder_hidden_states": config.decoder_layers + 1}


def _transformer_attentions(config) -> dict[str, int]:
    return {"encoder_attentions": config.encoder_layers, "decoder_attentions": config.decoder_layers,
            "cross_attentions": config.decoder_layers}


# -------------------------------------------------------------------------------------- training recipes ----
# Keyed by transformers' TrainingArguments field names, plus bptt (the LM's training context) and the zaremba
# schedule's decay_start_epoch / decay_factor (the vocabulary of hf_seqmodels.recipes). max_grad_norm 0 clips nothing;
# warmup_steps below 1 is a fraction of the steps (as in TrainingArguments). Our losses are means over the
# predicted tokens: where a paper's SGD step sums the loss over a fixed number T of positions, the step here
# is the same one, (learning rate, clipping norm) = (T x the paper's, the paper's / T).
# bf16=True (autocast, fp32 master weights and optimizer state) where it pays on GPUs and on CPUs with fast bf16
# kernels: on a 2-core AMD EPYC with AVX512-BF16 a Transformer LM, encoder-decoder or BERT step takes about half
# the fp32 time (benchmarks/bench_bf16.py: 0.48 to 0.55 from nanoGPT's CPU sizes to 4 x 256) with loss curves
# that agree within noise. Where a device has no bf16 units (an Intel Xeon without AMX: the same steps take 1.2
# to 1.6 times fp32's; an AMD EPYC without AVX-512: 11.4 times), the recipe's bf16 is off and the run trains in
# fp32 (training.core.precision); an explicit --bf16 still forces it. The named presets of those families carry
# it; the family default (the recipe of a loaded model or of --config_name) and fine-tuning stay in fp32, as do
# the recurrent recipes: an LSTM step gains less (0.61) and their SGD recipes are the papers' fp32 ones.

# torch_compile=True likewise applies on a GPU only (training.core.precision): compiling fuses the step's kernels
# there (BERT-base on an H200: 36 ms a step compiled against 49 ms eager), while on a CPU it costs more than it saves.
# bf16_weights=True (bfloat16 weights, float32 master copy in the optimizer: training.core.master_weights) applies
# on a GPU with the run's bf16: the forward and backward read half the weight bytes and cast none.

#: the named presets of the Transformer families and BERT train in bf16, compiled, on a GPU
_GPU_FAST = dict(bf16=True, bf16_weights=True, torch_compile=True)

#: tests and smoke runs: small and fast
_TINY = dict(optim="adamw_torch", learning_rate=1e-3, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
             lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
             per_device_train_batch_size=8, gradient_accumulation_steps=1, num_train_epochs=1, max_steps=-1,
             bf16=False)
_TINY_LM = dict(_TINY, bptt=16)

# Bengio et al. (2003), section 4: SGD with rate 1e-3 after every predicted word (its 1 / (1 + 1e-8 t) decay
# is negligible over a run: constant), weight decay 1e-4, no clipping, 10 to 20 epochs (early stopping on
# validation). An update here averages 20 rows x 35 positions = 700 predictions: the paper's steps are lr 0.7.
_BENGIO_2003 = dict(optim="sgd", learning_rate=0.7, lr_scheduler_type="constant", warmup_steps=0,
                    weight_decay=1e-4, max_grad_norm=0.0, per_device_train_batch_size=20, num_train_epochs=15,
                    bptt=35)


def _zaremba(bptt: int, epochs: int, decay_start_epoch: int, decay_factor: float, clip: float) -> dict[str, Any]:
    """Zaremba et al. (2014): SGD at rate 1 on the loss summed over ``bptt`` steps (mean over a batch of 20),
    gradient norm clipped at ``clip``, rate times ``decay_factor`` each epoch from ``decay_start_epoch`` on."""
    return dict(optim="sgd", learning_rate=float(bptt), lr_scheduler_type="zaremba",
                decay_start_epoch=decay_start_epoch, decay_factor=decay_factor, warmup_steps=0, weight_decay=0.0,
                max_grad_norm=clip / bptt, per_device_train_batch_size=20, num_train_epochs=epochs, bptt=bptt)


# Karpathy's char-rnn (train.lua defaults): RMSprop at 2e-3, times 0.97 each epoch after 10, batches of
# 50 x 50 characters, gradients clamped at 5, 50 epochs. We offer no RMSprop: Adam at the same rate.
_CHAR_RNN = dict(optim="adamw_torch", learning_rate=2e-3, lr_scheduler_type="zaremba", decay_start_epoch=10,
                 decay_factor=0.97, warmup_steps=0, weight_decay=0.0, max_grad_norm=5.0,
                 per_device_train_batch_size=50, num_train_epochs=50, bptt=50)
# recurrent classifiers and taggers trained from scratch: no paper preset, a plain Adam recipe
_RNN_CLASSIFIER = dict(optim="adamw_torch", learning_rate=1e-3, lr_scheduler_type="linear", warmup_steps=0,
                       weight_decay=0.0, max_grad_norm=5.0, per_device_train_batch_size=32, num_train_epochs=5)

# Bahdanau et al. (2015), appendix B: minibatches of 80 sentence pairs, gradient norm rescaled to at most 1,
# Adadelta (rho 0.95, eps 1e-6) for about five days. We offer no Adadelta: Adam at 1e-3, 5 epochs.
_RNNSEARCH = dict(optim="adamw_torch", learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0,
                  weight_decay=0.0, max_grad_norm=1.0, per_device_train_batch_size=80, num_train_epochs=5)
# Luong et al. (2015), section 4.1: SGD at 1.0, batches of 128, gradient norm rescaled to at most 5; 10 epochs
# halving the rate after 5, and for the dropout models (ours: dropout 0.2) 12 epochs halving after 8. The paper
# sums the loss over a sentence's target words (about 25), ours averages them: smaller steps at the same rate.
_LUONG = dict(optim="sgd", learning_rate=1.0, lr_scheduler_type="zaremba", decay_start_epoch=8, decay_factor=0.5,
              warmup_steps=0, weight_decay=0.0, max_grad_norm=5.0, per_device_train_batch_size=128,
              num_train_epochs=12)

# Vaswani et al. (2017), section 5: Adam (0.9, 0.98, 1e-9), noam schedule (learning_rate 1 scales it) with
# 4000 warm-up steps, no clipping, about 25,000 target tokens an update on 8 GPUs (here 8 accumulated batches
# of 112 pairs of about 28 tokens), 100,000 steps (big: 300,000); label smoothing is in the config.
_VASWANI = dict(optim="adamw_torch", learning_rate=1.0, adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-9,
                lr_scheduler_type="noam", warmup_steps=4000, weight_decay=0.0, max_grad_norm=0.0,
                per_device_train_batch_size=112, gradient_accumulation_steps=8, max_steps=100_000)
# the decoder alone as an LM: the same updates of about 25,000 tokens (8 x 6 rows of 512)
_VASWANI_LM = dict(_VASWANI, per_device_train_batch_size=6, bptt=512)
# Radford et al. (2018), section 4.1: Adam at 2.5e-4, linear warm-up over 2000 updates then cosine to 0,
# 64 sequences of 512 tokens, 100 epochs, weight decay 0.01; the released code clips the gradient norm at 1.
_GPT_1 = dict(optim="adamw_torch", learning_rate=2.5e-4, adam_beta2=0.999, adam_epsilon=1e-8,
              lr_scheduler_type="cosine", warmup_steps=2000, weight_decay=0.01, max_grad_norm=1.0,
              per_device_train_batch_size=64, gradient_accumulation_steps=1, num_train_epochs=100, max_steps=-1,
              bptt=512, **_GPU_FAST)
# nanoGPT's CPU recipe for Tiny Shakespeare characters (its README and config/train_shakespeare_char.py): AdamW
# at 1e-3 (beta2 0.99: few tokens per step), 100 warm-up steps then cosine to 1e-4, weight decay 0.1, gradient
# norm clipped at 1, 12 windows of 64 characters, 2,000 steps. The fused AdamW kernel takes the same steps.
_NANOGPT_CPU = dict(optim="adamw_torch_fused", learning_rate=1e-3, adam_beta1=0.9, adam_beta2=0.99, adam_epsilon=1e-8,
                    lr_scheduler_type="cosine", lr_scheduler_kwargs={"min_lr_ratio": 0.1}, warmup_steps=100,
                    weight_decay=0.1, max_grad_norm=1.0, per_device_train_batch_size=12, gradient_accumulation_steps=1,
                    bptt=64, max_steps=2000, **_GPU_FAST)
# nanoGPT's GPU recipe for the same data (config/train_shakespeare_char.py): the CPU recipe with 64 windows of
# 256 characters and 5,000 steps (80 epochs of the text: the windows are read in a new order every epoch, where
# nanoGPT draws random offsets)
_NANOGPT_SHAKESPEARE_CHAR = dict(_NANOGPT_CPU, per_device_train_batch_size=64, bptt=256, max_steps=5000,
                                 shuffle_windows=True)
# a small Transformer on Multi30k: the paper's Adam and noam schedule, its peak (about 1e-3 at width 256) after
# 1,000 warm-up steps (a hundred-odd updates an epoch at 4,096 tokens), fairseq's weight decay 1e-4 for IWSLT
_TRANSFORMER_MULTI30K = dict(_VASWANI, learning_rate=0.5, warmup_steps=1000, weight_decay=1e-4, max_grad_norm=1.0,
                             gradient_accumulation_steps=1, max_steps=-1, num_train_epochs=60, **_GPU_FAST)

# Devlin et al. (2019), appendix A.2: Adam at 1e-4 (0.9, 0.999; eps 1e-6 in the released code), weight decay
# 0.01, warm-up over 10,000 steps then linear decay, 256 sequences an update (here 8 accumulated batches of 32),
# 1,000,000 steps; the released code clips the gradient norm at 1. The compact models of Turc et al. (2019)
# take this recipe too.
_BERT_PRETRAINING = dict(optim="adamw_torch", learning_rate=1e-4, adam_beta1=0.9, adam_beta2=0.999,
                         adam_epsilon=1e-6, lr_scheduler_type="linear", warmup_steps=10_000, weight_decay=0.01,
                         max_grad_norm=1.0, per_device_train_batch_size=32, gradient_accumulation_steps=8,
                         max_steps=1_000_000)


def _bert_finetuning(learning_rate: float, batch_size: int) -> dict[str, Any]:
    """Devlin et al. (2019), section 4 and appendix A.3: Adam, 3 epochs, warm-up over the first 10% of the
    steps then linear decay, weight decay 0.01 (the released code's)."""
    return dict(optim="adamw_torch", learning_rate=learning_rate, lr_scheduler_type="linear", warmup_steps=0.1,
                weight_decay=0.01, max_grad_norm=1.0, per_device_train_batch_size=batch_size, num_train_epochs=3)


# Kim (2014), section 3.1: Adadelta (rho 0.95), minibatches of 50, no gradient clipping (the output layer's l2
# max-norm is in the config), 25 epochs in the released code. We offer no Adadelta: Adam at 1e-3.
_KIM_2014 = dict(optim="adamw_torch", learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0,
                 weight_decay=0.0, max_grad_norm=0.0, per_device_train_batch_size=50, num_train_epochs=25)
# Lample et al. (2016), section 4: SGD at 0.01 on one sentence at a time, gradient norm clipped at 5 (the
# paper gives no epoch count: 50 here).
_LAMPLE_2016 = dict(optim="sgd", learning_rate=0.01, lr_scheduler_type="constant", warmup_steps=0,
                    weight_decay=0.0, max_grad_norm=5.0, per_device_train_batch_size=1, num_train_epochs=50)


# ------------------------------------------------------------------------ papers and architectures ----
# What a family's model cards cite and how they describe a config (hf_seqmodels.cards).

CELL_PAPERS = {  # by cell_type; the rnn_tanh / rnn_relu cells are Elman's
    "lstm": Citation(
        "Hochreiter & Schmidhuber (1997), Long Short-Term Memory",
        """@article{hochreiter1997long,
  title={Long Short-Term Memory},
  author={Hochreiter, Sepp and Schmidhuber, J{\\"u}rgen},
  journal={Neural Computation},
  volume={9},
  number={8},
  pages={1735--1780},
  year={1997}
}""",
    ),
    "peephole_lstm": Citation(
        "Gers & Schmidhuber (2000), Recurrent Nets that Time and Count",
        """@inproceedings{gers2000recurrent,
  title={Recurrent Nets that Time and Count},
  author={Gers, Felix A. and Schmidhuber, J{\\"u}rgen},
  booktitle={Proceedings of the IEEE-INNS-ENNS International Joint Conference on Neural Networks (IJCNN)},
  volume={3},
  pages={189--194},
  year={2000}
}""",
    ),
    "gru": Citation(
        "Cho et al. (2014), Learning Phrase Representations using RNN Encoder-Decoder",
        """@inproceedings{cho2014learning,
  title={Learning Phrase Representations using {RNN} Encoder-Decoder for Statistical Machine Translation},
  author={Cho, Kyunghyun and van Merri{\\"e}nboer, Bart and Gulcehre, Caglar and Bahdanau, Dzmitry and
          Bougares, Fethi and Schwenk, Holger and Bengio, Yoshua},
  booktitle={EMNLP},
  year={2014}
}""",
    ),
    "rnn": Citation(
        "Elman (1990), Finding Structure in Time; Mikolov et al. (2010), Recurrent neural network based language model",
        """@article{elman1990finding,
  title={Finding Structure in Time},
  author={Elman, Jeffrey L.},
  journal={Cognitive Science},
  volume={14},
  number={2},
  pages={179--211},
  year={1990}
}""",
    ),
}

_BENGIO_2003_PAPER = Citation(
        "Bengio et al. (2003), A Neural Probabilistic Language Model",
        """@article{bengio2003neural,
  title={A Neural Probabilistic Language Model},
  author={Bengio, Yoshua and Ducharme, R{\\'e}jean and Vincent, Pascal and Jauvin, Christian},
  journal={Journal of Machine Learning Research},
  volume={3},
  pages={1137--1155},
  year={2003}
}""",
)
_ZAREMBA_2014_PAPER = Citation(
        "Zaremba, Sutskever & Vinyals (2014), Recurrent Neural Network Regularization",
        """@article{zaremba2014recurrent,
  title={Recurrent Neural Network Regularization},
  author={Zaremba, Wojciech and Sutskever, Ilya and Vinyals, Oriol},
  journal={arXiv preprint arXiv:1409.2329},
  year={2014}
}""",
)
_ATTENTION_PAPERS = Citation(
    "Bahdanau, Cho & Bengio (2015), Neural Machine Translation by Jointly Learning to Align and Translate; "
    "Luong, Pham & Manning (2015), Effective Approaches to Attention-based Neural Machine Translation",
    """@inproceedings{bahdanau2015neural,
  title={Neural Machine Translation by Jointly Learning to Align and Translate},
  author={Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  booktitle={ICLR},
  year={2015}
}

@inproceedings{luong2015effective,
  title={Effective Approaches to Attention-based Neural Machine Translation},
  author={Luong, Minh-Thang and Pham, Hieu and Manning, Christopher D.},
  booktitle={EMNLP},
  year={2015}
}""",
)
_BERT_PAPER = Citation(
    "Devlin et al. (2019), BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
    """@inproceedings{devlin2019bert,
  title={{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding},
  author={Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina},
  booktitle={NAACL},
  year={2019}
}""",
)
_VASWANI_2017_PAPER = Citation(
    "Vaswani et al. (2017), Attention Is All You Need",
    r"""@inproceedings{vaswani2017attention,
  title={Attention Is All You Need},
  author={Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
          Gomez, Aidan N. and Kaiser, {\L}ukasz and Polosukhin, Illia},
  booktitle={NeurIPS},
  year={2017}
}""",
)
_KIM_2014_PAPER = Citation(
    "Kim (2014), Convolutional Neural Networks for Sentence Classification",
    """@inproceedings{kim2014convolutional,
  title={Convolutional Neural Networks for Sentence Classification},
  author={Kim, Yoon},
  booktitle={EMNLP},
  pages={1746--1751},
  year={2014}
}""",
)
_TAGGER_PAPERS = Citation(
    "Huang, Xu & Yu (2015), Bidirectional LSTM-CRF Models for Sequence Tagging; "
    "Lample et al. (2016), Neural Architectures for Named Entity Recognition",
    """@article{huang2015bidirectional,
  title={Bidirectional {LSTM-CRF} Models for Sequence Tagging},
  author={Huang, Zhiheng and Xu, Wei and Yu, Kai},
  journal={arXiv preprint arXiv:1508.01991},
  year={2015}
}

@inproceedings{lample2016neural,
  title={Neural Architectures for Named Entity Recognition},
  author={Lample, Guillaume and Ballesteros, Miguel and Subramanian, Sandeep and Kawakami, Kazuya and Dyer, Chris},
  booktitle={NAACL},
  year={2016}
}""",
)


def _cell_papers(config) -> tuple[Citation, ...]:
    """The paper of ``config.cell_type``."""
    return (CELL_PAPERS["rnn" if config.cell_type.startswith("rnn") else config.cell_type],)


def _nnlm_architecture(c) -> str:
    return (
        f"Feed-forward neural LM: {c.context_size} previous tokens → embeddings ({c.embedding_size}) → "
        f"tanh layer ({c.hidden_size}) → softmax" + (" + direct connections" if c.direct_connections else "")
    )


def _rnn_architecture(c) -> str:
    return (
        f"{c.num_hidden_layers}-layer {c.cell_type.upper().replace('_', ' ')} language model, "
        f"hidden size {c.hidden_size}, embeddings {c.embedding_size}"
        + (", tied input/output embeddings" if c.tie_word_embeddings else "")
    )


def _rnn_seq2seq_architecture(c) -> str:
    return (
        f"RNN encoder-decoder ({c.encoder_layers}-layer {'bidirectional ' if c.bidirectional_encoder else ''}"
        f"{c.encoder_cell_type.upper().replace('_', ' ')} encoder, {c.decoder_layers}-layer "
        f"{c.decoder_cell_type.upper().replace('_', ' ')} decoder, "
        f"hidden size {c.hidden_size}) with {c.attention_score} attention, {c.attention_wiring} wiring"
    )


def _transformer_architecture(c) -> str:
    return (
        f"Transformer encoder-decoder: {c.encoder_layers}+{c.decoder_layers} layers, d_model {c.d_model}, "
        f"{c.encoder_attention_heads} heads, feed-forward {c.encoder_ffn_dim}"
    )


def _transformer_lm_architecture(c) -> str:
    return (
        f"decoder-only Transformer language model: {c.decoder_layers} layers, d_model {c.d_model}, "
        f"{c.decoder_attention_heads} heads, feed-forward {c.decoder_ffn_dim}"
    )


def _bert_architecture(c) -> str:
    return (
        f"BERT encoder: {c.num_hidden_layers} layers, hidden size {c.hidden_size}, {c.num_attention_heads} heads, "
        f"feed-forward {c.intermediate_size}"
    )


def _tagger_architecture(c) -> str:
    return (
        f"sequence tagger: {'bidirectional ' if c.bidirectional else ''}{c.num_hidden_layers}-layer "
        f"{c.cell_type.upper().replace('_', ' ')} (hidden size {c.hidden_size}) over {c.embedding_size}-dimensional "
        f"word embeddings" + (f" and a character {c.char_encoder.upper()} encoder" if c.char_encoder else "")
        + (", linear-chain CRF" if c.use_crf else ", per-token softmax")
    )


def _textcnn_architecture(c) -> str:
    return (
        f"TextCNN sentence classifier: {c.num_filters} filters of each width {', '.join(map(str, c.filter_sizes))} "
        f"over {c.embedding_size}-dimensional embeddings ({c.embedding_mode}), max-over-time pooling"
    )


#: every family of the package (:func:`register_family` adds one)
FAMILY_DESCRIPTIONS: list[Family] = [
    Family(
        name="bilstm_crf", config_class=BiLSTMCRFConfig,
        heads={AutoModel: BiLSTMCRFModel, AutoModelForTokenClassification: BiLSTMCRFForTokenClassification},
        input_kind="tagger", hidden_states=_recurrent_layers,
        citation=_TAGGER_PAPERS, config_citations=_cell_papers, architecture=_tagger_architecture,
        # word vectors (8) + character features (8) = hidden_size: hidden_states[0] as wide as transformers'
        # testers assume (the preset's 12-wide words are covered by the conformance width tests)
        tiny_overrides={"id2label": {0: "O", 1: "B-X", 2: "I-X"}, "embedding_size": 8},
        capabilities=Capabilities(inputs_embeds=True, num_items_in_batch=False),
        recipe=_LAMPLE_2016, preset_recipes={"tiny": _TINY},
    ),
    Family(
        name="nnlm", config_class=NNLMConfig,
        heads={AutoModel: NNLMModel, AutoModelForCausalLM: NNLMForCausalLM},
        hidden_states=lambda config: {"hidden_states": 2},  # x = [C(w)...], tanh layer
        citation=_BENGIO_2003_PAPER, architecture=_nnlm_architecture,
        tiny_overrides={"context_size": 2},  # x = 2 x 8 = hidden_size: every hidden state hidden_size wide
        common_properties=("vocab_size", "hidden_size"),
        capabilities=Capabilities(stateful_cache=True, inputs_embeds=True, gradient_checkpointing=False),
        recipe=_BENGIO_2003, preset_recipes={"tiny": _TINY_LM},
    ),
    Family(
        name="rnn", config_class=RNNConfig,
        heads={
            AutoModel: RNNModel,
            AutoModelForCausalLM: RNNForCausalLM,
            AutoModelForSequenceClassification: RNNForSequenceClassification,
            AutoModelForTokenClassification: RNNForTokenClassification,
        },
        hidden_states=_recurrent_layers,
        citation=_ZAREMBA_2014_PAPER, config_citations=_cell_papers, architecture=_rnn_architecture,
        tiny_overrides={"embedding_size": None},  # embeddings as wide as the layers (hidden_size)
        capabilities=Capabilities(stateful_cache=True, inputs_embeds=True, tied_embeddings=True),
        # Zaremba's small model: his released code's 20 steps (the paper's 35 are the medium and large ones)
        recipe=_zaremba(bptt=20, epochs=13, decay_start_epoch=4, decay_factor=0.5, clip=5.0),
        preset_recipes={
            "tiny": _TINY_LM,
            "zaremba-medium": _zaremba(bptt=35, epochs=39, decay_start_epoch=6, decay_factor=1 / 1.2, clip=5.0),
            "zaremba-large": _zaremba(bptt=35, epochs=55, decay_start_epoch=14, decay_factor=1 / 1.15, clip=10.0),
            "char-rnn": _CHAR_RNN,
            "peephole-lstm": _CHAR_RNN,
        },
        task_recipes={"AutoModelForSequenceClassification": _RNN_CLASSIFIER,
                      "AutoModelForTokenClassification": _RNN_CLASSIFIER},
    ),
    Family(
        name="rnn_seq2seq", config_class=RNNSeq2SeqConfig,
        heads={AutoModel: RNNSeq2SeqModel, AutoModelForSeq2SeqLM: RNNSeq2SeqForConditionalGeneration},
        input_kind="seq2seq", hidden_states=_seq2seq_stacks,
        citation=_ATTENTION_PAPERS, architecture=_rnn_seq2seq_architecture,
        # embeddings and both directions of the encoder together (2 x 8) as wide as the decoder (hidden_size)
        tiny_overrides={"embedding_size": None, "encoder_hidden_size": 8},
        attentions=lambda config: {"cross_attentions": 1},  # the decoder's alignment over the source
        capabilities=Capabilities(is_encoder_decoder=True, stateful_cache=True, tied_embeddings=True),
        recipe=_RNNSEARCH,
        preset_recipes={"tiny": _TINY, "luong-dot": _LUONG, "luong-general": _LUONG, "luong-concat": _LUONG},
    ),
    Family(
        name="transformer", config_class=TransformerConfig,
        heads={AutoModel: TransformerModel, AutoModelForSeq2SeqLM: TransformerForConditionalGeneration},
        input_kind="seq2seq", hidden_states=_seq2seq_stacks, attentions=_transformer_attentions,
        citation=_VASWANI_2017_PAPER, architecture=_transformer_architecture,
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(is_encoder_decoder=True, static_cache=True, inputs_embeds=True, sdpa=True,
                                  tied_embeddings=True),
        recipe=_VASWANI,
        preset_recipes={"tiny": _TINY, "transformer-base": _GPU_FAST,
                        "transformer-big": dict(max_steps=300_000, **_GPU_FAST),
                        "transformer-multi30k": _TRANSFORMER_MULTI30K},
    ),
    Family(
        name="transformer_lm", config_class=TransformerLMConfig,
        heads={AutoModel: TransformerLMModel, AutoModelForCausalLM: TransformerForCausalLM},
        hidden_states=lambda config: {"hidden_states": config.decoder_layers + 1},
        citation=_VASWANI_2017_PAPER, architecture=_transformer_lm_architecture,
        attentions=lambda config: {"attentions": config.decoder_layers},
        tiny_overrides={"dropout": 0.0},  # trained without dropout noise, as transformers' causal-LM testers' models
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(static_cache=True, inputs_embeds=True, sdpa=True, tied_embeddings=True),
        recipe=_VASWANI_LM,
        preset_recipes={"tiny": _TINY_LM, "transformer-base": _GPU_FAST, "gpt-1": _GPT_1, "nanogpt-cpu": _NANOGPT_CPU,
                        "nanogpt-shakespeare-char": _NANOGPT_SHAKESPEARE_CHAR},
    ),
    Family(
        name="bert", config_class=BertConfig,
        heads={
            AutoModel: BertModel,
            AutoModelForPreTraining: BertForPreTraining,
            AutoModelForMaskedLM: BertForMaskedLM,
            AutoModelForNextSentencePrediction: BertForNextSentencePrediction,
            AutoModelForSequenceClassification: BertForSequenceClassification,
            AutoModelForTokenClassification: BertForTokenClassification,
            AutoModelForQuestionAnswering: BertForQuestionAnswering,
            AutoModelForMultipleChoice: BertForMultipleChoice,
        },
        input_kind="bert",
        citation=_BERT_PAPER, architecture=_bert_architecture,
        hidden_states=lambda config: {"hidden_states": config.num_hidden_layers + 1},
        attentions=lambda config: {"attentions": config.num_hidden_layers},
        common_properties=("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"),
        capabilities=Capabilities(static_cache=True, inputs_embeds=True, sdpa=True, tied_embeddings=True),
        recipe=_BERT_PRETRAINING,
        preset_recipes={"tiny": _TINY, **{f"bert-{size}": _GPU_FAST
                                          for size in ("tiny", "mini", "small", "medium", "base", "large")}},
        task_recipes={  # GLUE and CoNLL: 2e-5 of {5e-5, 3e-5, 2e-5}, batch 32; SQuAD v1.1: 5e-5; SWAG: 2e-5, 16
            "AutoModelForSequenceClassification": _bert_finetuning(2e-5, 32),
            "AutoModelForTokenClassification": _bert_finetuning(2e-5, 32),
            "AutoModelForQuestionAnswering": _bert_finetuning(5e-5, 32),
            "AutoModelForMultipleChoice": _bert_finetuning(2e-5, 16),
        },
    ),
    Family(
        name="textcnn", config_class=TextCNNConfig,
        heads={AutoModel: TextCNNModel, AutoModelForSequenceClassification: TextCNNForSequenceClassification},
        hidden_states=lambda config: {"hidden_states": 2},  # word vectors, features
        citation=_KIM_2014_PAPER, architecture=_textcnn_architecture,
        common_properties=("vocab_size",),
        capabilities=Capabilities(gradient_checkpointing=False, mask_removes_tokens=True),
        recipe=_KIM_2014, preset_recipes={"tiny": _TINY},
    ),
]

#: ``{config class: {Auto class: model class}}``, the Auto-class view of :data:`FAMILY_DESCRIPTIONS`.
FAMILIES = {family.config_class: dict(family.heads) for family in FAMILY_DESCRIPTIONS}


def family_of(config_or_class) -> Family:
    """The :class:`Family` of a config, a config class or a model class of the package."""
    for family in FAMILY_DESCRIPTIONS:
        classes = (family.config_class, *family.heads.values())
        if config_or_class in classes or type(config_or_class) is family.config_class:
            return family
    raise ValueError(f"{config_or_class!r} belongs to no family of the package; families: "
                     f"{[f.name for f in FAMILY_DESCRIPTIONS]}")


def families_with_head(*auto_classes) -> dict[str, type]:
    """``{family name: config class}`` of the families with a head for any of ``auto_classes`` (e.g.
    ``AutoModelForCausalLM``): the families a training script can build, read from the registry."""
    return {family.name: family.config_class for family in FAMILY_DESCRIPTIONS
            if any(auto_class in family.heads for auto_class in auto_classes)}


class FamiliesWithHead(Mapping):
    """:func:`families_with_head` as a live mapping: read from the registry at each use, so that a family
    registered after the training scripts were imported (:func:`register_family`) is one of their
    ``--model_family`` choices too."""

    def __init__(self, *auto_classes):
        self.auto_classes = auto_classes

    def __getitem__(self, name: str) -> type:
        return families_with_head(*self.auto_classes)[name]

    def __iter__(self):
        return iter(families_with_head(*self.auto_classes))

    def __len__(self) -> int:
        return len(families_with_head(*self.auto_classes))


def family_named(name: str) -> Family:
    """The :class:`Family` called ``name`` (``"rnn"``, ``"bert"``, ...); ValueError listing them otherwise."""
    for family in FAMILY_DESCRIPTIONS:
        if family.name == name:
            return family
    raise ValueError(f"model_family={name!r} is not a family of the package; families: "
                     f"{', '.join(f.name for f in FAMILY_DESCRIPTIONS)}")


def training_recipe(family_name: str, preset: str | None = None, task: str | type | None = None) -> dict[str, Any]:
    """The training recipe of ``preset`` of the family ``family_name``, keyed by ``TrainingArguments`` field
    names (plus ``bptt``, ``decay_start_epoch``, ``decay_factor``): the family default merged with the preset's
    entry (no preset: the family default). ``task`` (an Auto class or its name, e.g.
    ``"AutoModelForSequenceClassification"``) selects a head's own recipe where it has one (BERT fine-tuning).
    Explicit command-line values override it. ValueError names the bad family, preset or task and the known ones.

    >>> training_recipe("rnn", "zaremba-medium")["decay_start_epoch"]
    6
    """
    return family_named(family_name).training_recipe(preset, task)


_registered = False


def auto_map_for(config_class) -> dict[str, str]:
    """``{"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM", ...}``."""
    def ref(cls):
        return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"

    auto_map = {"AutoConfig": ref(config_class)}
    for auto_class, model_class in FAMILIES[config_class].items():
        auto_map[auto_class.__name__] = ref(model_class)
    return auto_map


def _register_with_auto_classes(family: Family) -> None:
    config_class = family.config_class
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    config_class.register_for_auto_class()
    config_class.AUTO_MAP = auto_map_for(config_class)
    for auto_class, model_class in family.heads.items():
        auto_class.register(config_class, model_class, exist_ok=True)
        model_class.register_for_auto_class(auto_class.__name__)


def register_all() -> None:
    global _registered
    if _registered:
        return
    for family in FAMILY_DESCRIPTIONS:
        _register_with_auto_classes(family)
    _registered = True


def register_family(family: Family) -> None:
    """Add ``family`` to the registry and register it with the Auto classes. ValueError if its name, config
    class or ``model_type`` is already a family's."""
    for known in FAMILY_DESCRIPTIONS:
        if family.name == known.name or family.config_class.model_type == known.config_class.model_type:
            raise ValueError(f"register_family: {family.name!r} (model_type "
                             f"{family.config_class.model_type!r}) clashes with the family {known.name!r}")
    FAMILY_DESCRIPTIONS.append(family)
    FAMILIES[family.config_class] = dict(family.heads)
    _register_with_auto_classes(family)


def unregister_family(family: Family) -> None:
    """Take ``family`` (added by :func:`register_family`) out of the registry again. Its ``model_type`` stays
    known to the Auto classes: transformers has no public way to remove a registration."""
    FAMILY_DESCRIPTIONS.remove(family)
    del FAMILIES[family.config_class]
