"""Random generation, signal processing, strings, n-grams and image decoding.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "bernoulli", "blackman_window", "dft", "hamming_window", "hann_window", "image_decoder",
    "mel_weight_matrix", "multinomial", "random_normal", "random_normal_like", "random_uniform",
    "regex_full_match", "stft", "string_concat", "string_normalizer", "string_split",
    "tfidf_vectorizer",
)

rule(*OPS)(write_node)
