"""Deploying models of the package without it: ``torch.export`` and ONNX programs, and generation in
onnxruntime from exported decoding steps.

:func:`export_model` exports any head (``hf-seqmodels export`` on the command line); :class:`OnnxGenerator`
runs greedy and beam search, equal to eager ``generate()``, and sampling over the decoding graphs that
:func:`export_generation` writes (:mod:`.step_graphs`) for every generative head: the NNLM, the recurrent LMs,
the Transformer LM and the Transformer and RNN encoder-decoders.
"""

from .exporting import FORMATS, export_model
from .onnx_generation import OnnxGenerator, export_generation
from .programs import ExportResult

__all__ = ["FORMATS", "ExportResult", "OnnxGenerator", "export_generation", "export_model"]
