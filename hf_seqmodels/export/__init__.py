"""Deploying models of the package without it: ``torch.export`` and ONNX programs, and generation in
onnxruntime from exported decoding steps.

:func:`export_model` exports any head (``hf-seqmodels export`` on the command line); :class:`OnnxGenerator`
decodes greedily with the step graphs it writes for the LSTM/GRU LMs, the Transformer LM and the RNN
encoder-decoder with attention.
"""

from .exporting import FORMATS, ExportResult, export_model
from .onnx_generation import OnnxGenerator, export_generation

__all__ = ["FORMATS", "ExportResult", "OnnxGenerator", "export_generation", "export_model"]
