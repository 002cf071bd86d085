"""The zoo's models (issue 12): architectures nobody here wrote, from ``transformers`` and
``timm``, torchvision segmentation models and detection heads, and recurrent sequence models, each
built from an explicit config object with random weights and a fixed seed (no hub download),
exported to ONNX by ``torch.onnx.export`` in ``bench/.venv-zoo`` (``bench/setup_zoo.sh``).

Four exports per model where they work, as separate files: the TorchScript exporter
(``ts``) and the dynamo exporter (``dynamo``), each static (batch 1) and with a dynamic
batch dim (``-dyn``; text and audio models also a dynamic sequence length, examples at
batch 2). Files: ``bench/.cache/zoo/<model>/<variant>.onnx`` + ``meta.json`` (inputs,
shapes, dtypes, seed, per-variant export time or error) + ``inputs.npz`` (the static example
inputs, meaningful values: token ids below the vocabulary, a padding mask of 0/1).

Importing this module is cheap (names only); torch/transformers/timm are imported inside the
builders, in the child process that exports one model.

    python bench/zoo_models.py --list
    python bench/zoo_models.py build [--only bert,resnet18] [--variants ts,ts-dyn,dynamo,dynamo-dyn]
                                     [--timeout 900] [--force]
    bench/.venv-zoo/bin/python bench/zoo_models.py _time NAME OURS_DIR N THREADS   (bench/latency.py)

``build`` runs under any Python: each model is exported by a child
``bench/.venv-zoo/bin/python bench/zoo_models.py _export NAME VARIANTS`` with a timeout
under ``nice``; a crash or a hang is recorded in that model's meta.json as the export error
of the variants it had not finished, and the next model goes on.

timm 1.0.31 imports torchvision at module level (``timm.layers.create_norm``, ``timm.data``),
and the only torchvision wheel for torch 2.13.0 links libtorch_cuda: it is installed
``--no-deps`` and imported without its C ops (see ``_torchvision``); torchvision's own
segmentation models and detection heads come from it too.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "zoo"
VENV_PYTHON = HERE / ".venv-zoo" / "bin" / "python"
SEED = 0
VARIANTS = ("ts", "dynamo", "ts-dyn", "dynamo-dyn")

# name -> (family, library, builder args): family decides the inputs and the dynamic dims:
# text (input_ids + attention_mask), seq2seq (+ decoder_input_ids, one step), causal (decoder
# LM), image, audio (raw waveform), mel (Whisper features + one decoder step), seq (features).
SPECS: dict[str, tuple[str, str]] = {
    # transformers: encoders
    "bert": ("text", "transformers"), "distilbert": ("text", "transformers"), "roberta": ("text", "transformers"),
    "albert": ("text", "transformers"), "electra": ("text", "transformers"), "mpnet": ("text", "transformers"),
    "mobilebert": ("text", "transformers"),
    # transformers: decoders (causal LM logits, no cache)
    "gpt2": ("causal", "transformers"), "gpt_neo": ("causal", "transformers"), "llama": ("causal", "transformers"),
    "mistral": ("causal", "transformers"), "qwen2": ("causal", "transformers"), "phi": ("causal", "transformers"),
    # transformers: encoder + one decoder step
    "t5": ("seq2seq", "transformers"), "bart": ("seq2seq", "transformers"), "marian": ("seq2seq", "transformers"),
    "whisper": ("mel", "transformers"),
    # transformers: audio encoders
    "wav2vec2": ("audio", "transformers"), "hubert": ("audio", "transformers"),
    # transformers: vision
    "vit": ("image", "transformers"), "deit": ("image", "transformers"), "beit": ("image", "transformers"),
    "swin": ("image", "transformers"), "convnext": ("image", "transformers"), "pvt": ("image", "transformers"),
    "segformer": ("image", "transformers"), "dpt": ("image", "transformers"),
    "mobilevit_deeplabv3": ("image", "transformers"),
    # timm (smallest variants, pretrained=False)
    "resnet18": ("image", "timm"), "efficientnet_b0": ("image", "timm"), "mobilenetv3_small_100": ("image", "timm"),
    "mobilevit_xxs": ("image", "timm"), "ghostnet_100": ("image", "timm"), "repvgg_a0": ("image", "timm"),
    "convmixer": ("image", "timm"), "maxvit_nano_rw_256": ("image", "timm"), "coatnet_nano_rw_224": ("image", "timm"),
    "poolformer_s12": ("image", "timm"), "edgenext_xx_small": ("image", "timm"), "fastvit_t8": ("image", "timm"),
    "nf_regnet_b0": ("image", "timm"), "efficientvit_b0": ("image", "timm"),
    # torchvision segmentation models; detectors' backbone + heads (no NMS)
    "fcn_resnet50": ("image", "torchvision"), "deeplabv3_mobilenet_v3_large": ("image", "torchvision"),
    "lraspp_mobilenet_v3_large": ("image", "torchvision"), "ssdlite320_mobilenet_v3_large": ("image", "torchvision"),
    "fasterrcnn_mobilenet_v3_fpn_rpn": ("image", "torchvision"),
    # recurrent sequence models (plain torch.nn)
    "lstm_2layer": ("seq", "torch"), "gru_bidirectional": ("seq", "torch"), "crnn_conv_gru": ("seq", "torch"),
}
MODELS = tuple(SPECS)

TEXT_LEN, VOCAB, IMG = 16, 1000, 64          # transformers models: small configs
HF_IMG = {"swin": 128}                       # 64 leaves the last stage (2x2) smaller than the window
TIMM_IMG = {"maxvit_nano_rw_256": 128, "coatnet_nano_rw_224": 128}


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- builders (child process only) --------------------------------------------------------------

def _hf(name: str) -> tuple[Any, list[str], str]:
    """(model, forward keyword names in input order, output attribute) of a transformers model."""
    import transformers as tf

    small = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                 max_position_embeddings=128)
    text = ["input_ids", "attention_mask"]
    s2s = ["input_ids", "attention_mask", "decoder_input_ids"]
    if name == "bert":
        return tf.BertForSequenceClassification(tf.BertConfig(**small, num_labels=3)), text, "logits"
    if name == "distilbert":
        cfg = tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=128)
        return tf.DistilBertModel(cfg), text, "last_hidden_state"
    if name == "roberta":
        return tf.RobertaModel(tf.RobertaConfig(**{**small, "max_position_embeddings": 130})), text, "last_hidden_state"
    if name == "albert":
        return tf.AlbertModel(tf.AlbertConfig(**small, embedding_size=32)), text, "last_hidden_state"
    if name == "electra":
        return tf.ElectraForSequenceClassification(tf.ElectraConfig(**small, embedding_size=32, num_labels=3)), text, "logits"
    if name == "mpnet":
        return tf.MPNetModel(tf.MPNetConfig(**{**small, "max_position_embeddings": 130})), text, "last_hidden_state"
    if name == "mobilebert":
        cfg = tf.MobileBertConfig(**{**small, "intermediate_size": 64}, embedding_size=32, intra_bottleneck_size=32,
                                  true_hidden_size=32, num_feedforward_networks=2)
        return tf.MobileBertModel(cfg), text, "last_hidden_state"
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4)
        return tf.GPT2LMHeadModel(cfg), text, "logits"
    if name == "gpt_neo":
        cfg = tf.GPTNeoConfig(vocab_size=VOCAB, max_position_embeddings=128, hidden_size=64, num_layers=2, num_heads=4,
                              attention_types=[[["global", "local"], 1]], window_size=8, intermediate_size=128)
        return tf.GPTNeoForCausalLM(cfg), text, "logits"
    if name in ("llama", "mistral", "qwen2"):
        cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM), "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
               "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM)}[name]
        return cls[1](cls[0](**small, num_key_value_heads=2)), text, "logits"
    if name == "phi":
        return tf.PhiForCausalLM(tf.PhiConfig(**small, partial_rotary_factor=0.5)), text, "logits"
    if name == "t5":
        cfg = tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                          num_heads=4, decoder_start_token_id=0)
        return tf.T5ForConditionalGeneration(cfg), s2s, "logits"
    if name in ("bart", "marian"):
        kw = dict(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=128)
        if name == "bart":
            return tf.BartForConditionalGeneration(tf.BartConfig(**kw)), s2s, "logits"
        return tf.MarianMTModel(tf.MarianConfig(**kw, decoder_start_token_id=VOCAB - 1, pad_token_id=VOCAB - 1)), s2s, "logits"
    if name == "whisper":
        cfg = tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=80, d_model=64, encoder_layers=2, decoder_layers=2,
                               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                               decoder_ffn_dim=128, max_source_positions=32, max_target_positions=32,
                               pad_token_id=VOCAB - 1, bos_token_id=VOCAB - 2, eos_token_id=VOCAB - 2,
                               decoder_start_token_id=VOCAB - 3, suppress_tokens=[], begin_suppress_tokens=[])
        return tf.WhisperForConditionalGeneration(cfg), ["input_features", "decoder_input_ids"], "logits"
    if name in ("wav2vec2", "hubert"):
        kw = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32, 32),
                  conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                  vocab_size=32)
        if name == "wav2vec2":
            return tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(**kw)), ["input_values"], "logits"
        return tf.HubertModel(tf.HubertConfig(**kw)), ["input_values"], "last_hidden_state"
    img = dict(image_size=IMG, num_channels=3)
    vit = dict(**img, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               num_labels=10)
    if name == "vit":
        return tf.ViTForImageClassification(tf.ViTConfig(**vit)), ["pixel_values"], "logits"
    if name == "deit":
        return tf.DeiTForImageClassificationWithTeacher(tf.DeiTConfig(**vit)), ["pixel_values"], "logits"
    if name == "beit":
        cfg = tf.BeitConfig(**vit, use_relative_position_bias=True)
        return tf.BeitForImageClassification(cfg), ["pixel_values"], "logits"
    if name == "swin":
        cfg = tf.SwinConfig(**{**img, "image_size": HF_IMG["swin"]}, patch_size=4, embed_dim=32, depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 8], window_size=4,
                            num_labels=10)
        return tf.SwinForImageClassification(cfg), ["pixel_values"], "logits"
    if name == "convnext":
        cfg = tf.ConvNextConfig(num_channels=3, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 2, 1], num_labels=10)
        return tf.ConvNextForImageClassification(cfg), ["pixel_values"], "logits"
    if name == "pvt":
        cfg = tf.PvtConfig(**img, depths=[1, 1, 1, 1], hidden_sizes=[16, 32, 64, 128], num_attention_heads=[1, 2, 4, 8],
                           sequence_reduction_ratios=[8, 4, 2, 1], num_labels=10)
        return tf.PvtForImageClassification(cfg), ["pixel_values"], "logits"
    if name == "segformer":
        cfg = tf.SegformerConfig(num_channels=3, depths=[1, 1, 1, 1], hidden_sizes=[16, 32, 64, 128],
                                 num_attention_heads=[1, 2, 4, 8], sr_ratios=[8, 4, 2, 1], decoder_hidden_size=64, num_labels=5)
        return tf.SegformerForSemanticSegmentation(cfg), ["pixel_values"], "logits"
    if name == "dpt":
        cfg = tf.DPTConfig(**{**vit, "num_hidden_layers": 4}, backbone_out_indices=[0, 1, 2, 3],
                           neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32, head_in_index=-1)
        return tf.DPTForDepthEstimation(cfg), ["pixel_values"], "predicted_depth"
    if name == "mobilevit_deeplabv3":
        cfg = tf.MobileViTConfig(**img, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 8, 16, 24, 32, 40, 160],
                                 aspp_out_channels=64, num_labels=5)
        return tf.MobileViTForSemanticSegmentation(cfg), ["pixel_values"], "logits"
    raise KeyError(name)


def _torchvision() -> Any:
    """torchvision 0.28.0 (installed --no-deps) with its C ops absent: the only wheel for torch
    2.13.0 links libtorch_cuda, so ``torchvision._C`` does not load beside the CPU torch, and
    the two modules that register Meta/Autograd kernels for those C ops (``nms``,
    ``roi_align``...) fail with "operator torchvision::nms does not exist". They are replaced by
    empty modules before the import; everything in Python (models, transforms, what timm
    imports) works, and the zoo calls no C op (no NMS, no RoIAlign)."""
    import importlib
    import types

    for mod in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(mod, types.ModuleType(mod))
    return importlib.import_module("torchvision")


def _timm() -> Any:
    _torchvision()
    import timm

    return timm


def _heads(name: str) -> Any:
    """torchvision's segmentation models and its detectors' backbone + prediction heads
    (torchvision's own classes, random weights), up to the raw head outputs: no anchor
    decoding, no NMS (a C op that does not load here)."""
    import torch
    from torch import nn

    tv = _torchvision()
    seg, det = tv.models.segmentation, tv.models.detection
    none = dict(weights=None, weights_backbone=None)

    class Seg(nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)["out"]

    class Heads(nn.Module):
        """Backbone features -> the detector's head; per-level outputs flattened and joined."""

        def __init__(self, inner: Any, rpn: bool) -> None:
            super().__init__()
            self.backbone, self.rpn = inner.backbone, rpn
            self.head = inner.rpn.head if rpn else inner.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            n = x.shape[0]
            if not self.rpn:
                out = self.head(feats)
                return out["cls_logits"], out["bbox_regression"]
            obj, delta = self.head(feats)
            return (torch.cat([o.permute(0, 2, 3, 1).reshape(n, -1) for o in obj], 1),
                    torch.cat([d.permute(0, 2, 3, 1).reshape(n, -1, 4) for d in delta], 1))

    if name == "fcn_resnet50":
        return Seg(seg.fcn_resnet50(**none, num_classes=21, aux_loss=False))
    if name == "deeplabv3_mobilenet_v3_large":
        return Seg(seg.deeplabv3_mobilenet_v3_large(**none, num_classes=21, aux_loss=False))
    if name == "lraspp_mobilenet_v3_large":
        return Seg(seg.lraspp_mobilenet_v3_large(**none, num_classes=21))
    if name == "ssdlite320_mobilenet_v3_large":
        return Heads(det.ssdlite320_mobilenet_v3_large(**none, num_classes=21), rpn=False)
    if name == "fasterrcnn_mobilenet_v3_fpn_rpn":
        return Heads(det.fasterrcnn_mobilenet_v3_large_320_fpn(**none, num_classes=21), rpn=True)
    raise KeyError(name)


def _seq(name: str) -> Any:
    import torch
    from torch import nn

    class Rnn(nn.Module):
        def __init__(self, kind: str) -> None:
            super().__init__()
            self.conv = nn.Conv1d(40, 40, 5, padding=2) if kind == "crnn" else None
            if kind == "lstm":
                self.rnn = nn.LSTM(40, 64, num_layers=2, batch_first=True)
            else:
                self.rnn = nn.GRU(40, 64, batch_first=True, bidirectional=(kind == "gru"))
            self.fc = nn.Linear(128 if kind == "gru" else 64, 12)

        def forward(self, x):
            if self.conv is not None:
                x = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
            y, _ = self.rnn(x)
            return self.fc(y)

    return Rnn({"lstm_2layer": "lstm", "gru_bidirectional": "gru", "crnn_conv_gru": "crnn"}[name])


def _redraw(model: Any) -> int:
    """Re-draw what initializers leave constant (BatchNorm statistics and affine parameters,
    zero-initialized residual gammas, layer scales of 1e-6, zero biases, ones of norms), seeded,
    so that every branch contributes to the outputs the check compares. Returns the count."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(SEED + 1)
    n = 0
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_var is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
                n += 1
        for p in model.parameters():
            if p.numel() > 1 and p.dtype.is_floating_point and bool((p == p.reshape(-1)[0]).all()):
                c = float(p.reshape(-1)[0])
                noise = torch.randn(p.shape, generator=g)
                p.copy_(noise * 0.1 if abs(c) < 1e-2 else c * (1 + 0.2 * noise))
                n += 1
    return n


def build(name: str) -> tuple[Any, list[str], list[str], int]:
    """(model in eval mode wrapped to return plain tensors, input names, output names, re-drawn count)."""
    import torch
    from torch import nn

    _torchvision()  # transformers imports it too when installed (image processors)
    torch.manual_seed(SEED)
    family, lib = SPECS[name]
    if lib == "transformers":
        inner, keys, attr = _hf(name)

        class Wrap(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = inner

            def forward(self, *args):
                out = self.model(**dict(zip(keys, args)), return_dict=True)
                return getattr(out, attr)

        model, outs = Wrap(), [attr]
        if hasattr(inner.config, "use_cache"):
            inner.config.use_cache = False
    elif lib == "torchvision":
        model, keys = _heads(name), ["pixel_values"]
        outs = ["scores", "boxes"] if SPECS[name][0] == "image" and name.startswith(("ssd", "faster")) else ["logits"]
    elif lib == "timm":
        timm = _timm()
        keys, outs = ["pixel_values"], ["logits"]
        if name == "convmixer":  # the registered ConvMixers are 20-32 blocks of 768-1536 channels
            from timm.models.convmixer import ConvMixer

            model = ConvMixer(dim=128, depth=4, kernel_size=5, patch_size=8, num_classes=100)
        else:
            kw = {"img_size": TIMM_IMG[name]} if name in TIMM_IMG else {}
            model = timm.create_model(name, pretrained=False, **kw)
    else:
        model, keys, outs = _seq(name), ["features"], ["logits"]
    redrawn = _redraw(model)
    model.eval()
    return model, keys, outs, redrawn


def example_inputs(name: str, batch: int) -> dict[str, Any]:
    """Seeded example inputs by name (numpy): token ids below the vocabulary, a 0/1 padding mask
    (the last 3 positions of the first row padded), images/audio/features standard normal."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    family = SPECS[name][0]
    if family in ("text", "causal", "seq2seq"):
        ids = rng.integers(3, VOCAB - 1, size=(batch, TEXT_LEN)).astype(np.int64)
        mask = np.ones((batch, TEXT_LEN), np.int64)
        mask[0, -3:] = 0
        out = {"input_ids": ids, "attention_mask": mask}
        if family == "seq2seq":
            out["decoder_input_ids"] = rng.integers(3, VOCAB - 1, size=(batch, 1)).astype(np.int64)
        return out
    if family == "mel":
        return {"input_features": rng.standard_normal((batch, 80, 64)).astype(np.float32),
                "decoder_input_ids": rng.integers(3, VOCAB - 1, size=(batch, 1)).astype(np.int64)}
    if family == "audio":
        return {"input_values": rng.standard_normal((batch, 1600)).astype(np.float32)}
    if family == "seq":
        return {"features": rng.standard_normal((batch, 50, 40)).astype(np.float32)}
    size = HF_IMG.get(name, IMG) if SPECS[name][1] == "transformers" else TIMM_IMG.get(name, 128)
    return {"pixel_values": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}


def dynamic_axes(name: str, inputs: dict[str, Any]) -> dict[str, dict[int, str]]:
    """Per input: axis -> symbol. Batch everywhere; the sequence length of text, audio and
    feature inputs too (not Whisper's mel frames: its encoder requires exactly 2x positions;
    not the one-step decoder ids)."""
    family = SPECS[name][0]
    axes: dict[str, dict[int, str]] = {}
    for k in inputs:
        axes[k] = {0: "batch"}
        if family in ("text", "causal", "seq2seq", "audio", "seq") and k != "decoder_input_ids":
            axes[k][1] = "seq" if family != "audio" else "samples"
    return axes


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    tmp.replace(path)


def export_one(name: str, variants: list[str]) -> None:
    """Child (in .venv-zoo): export ``name`` for each variant; meta.json after each."""
    import inspect
    import io
    import logging
    import warnings
    from contextlib import redirect_stdout

    import numpy as np
    import torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    out = CACHE / name
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    model, keys, outs, redrawn = build(name)
    static = example_inputs(name, 1)
    dyn = example_inputs(name, 2)
    np.savez(out / "inputs.npz", **static)
    meta.update({"model": name, "family": SPECS[name][0], "library": SPECS[name][1], "seed": SEED,
                 "torch": torch.__version__, "redrawn_constant_tensors": redrawn,
                 "parameters": int(sum(p.numel() for p in model.parameters())),
                 "inputs": [{"name": k, "shape": list(v.shape), "dtype": str(v.dtype)} for k, v in static.items()],
                 "outputs": outs, "dynamic_axes": dynamic_axes(name, static),
                 "dynamic_example_shapes": {k: list(v.shape) for k, v in dyn.items()}})
    meta.setdefault("exports", {})
    for var in variants:
        path = out / f"{var}.onnx"
        is_dyn = var.endswith("-dyn")
        feeds = dyn if is_dyn else static
        args = tuple(torch.from_numpy(feeds[k]) for k in keys)
        rec: dict[str, Any] = {"file": path.name}
        t0 = time.perf_counter()
        path.unlink(missing_ok=True)
        try:
            with torch.no_grad(), redirect_stdout(io.StringIO()):
                if var.startswith("ts"):
                    torch.onnx.export(model, args, str(path), dynamo=False, input_names=keys, output_names=outs,
                                      dynamic_axes=dynamic_axes(name, feeds) if is_dyn else None)
                else:
                    from torch.export import Dim

                    shapes: Any = None
                    if is_dyn:
                        shapes = tuple({ax: Dim.DYNAMIC for ax in dynamic_axes(name, feeds)[k]} for k in keys)
                        params = inspect.signature(model.forward).parameters.values()
                        if any(p.kind is p.VAR_POSITIONAL for p in params):  # the transformers wrapper's *args
                            shapes = (shapes,)
                    prog = torch.onnx.export(model, args, dynamo=True, input_names=keys, output_names=outs,
                                             dynamic_shapes=shapes, verbose=False)
                    prog.save(str(path), external_data=False)
            import onnx

            m = onnx.load(str(path))
            rec.update(ok=True, opset=next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None),
                       nodes=len(m.graph.node), bytes=path.stat().st_size,
                       graph_inputs=[{"name": i.name, "dims": [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]}
                                     for i in m.graph.input])
        except Exception as exc:  # noqa: BLE001 - an exporter failure is data
            path.unlink(missing_ok=True)
            msg = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            # torch.onnx wraps torch.export's error in a generic first line: keep the summary's cause
            cause = next((ln for ln in msg if ln.startswith("<class ")), msg[0] if msg else "")
            rec.update(ok=False, error=f"{type(exc).__name__}: {cause[:400]}")
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        meta["exports"][var] = rec
        _write_json(meta_path, meta)
        say(f"{name}/{var}: " + ("ok" if rec["ok"] else rec["error"]) + f" ({rec['seconds']} s)")


def build_all(names: list[str], variants: list[str], timeout: float, force: bool) -> list[str]:
    """Export every model in its own child with a timeout; returns one summary line per model."""
    if not VENV_PYTHON.exists():
        raise SystemExit(f"{VENV_PYTHON} missing: run bench/setup_zoo.sh")
    lines = []
    for name in names:
        meta_path = CACHE / name / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        done = {v for v, r in meta.get("exports", {}).items() if not r.get("crash")}  # a crash is retried
        todo = [v for v in variants if force or v not in done]
        if todo:
            say(f"{name}: exporting {','.join(todo)}")
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                   "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
            try:
                proc = subprocess.run(["nice", "-n", "10", str(VENV_PYTHON), __file__, "_export", name, ",".join(todo)],
                                      capture_output=True, text=True, timeout=timeout, env=env, cwd=str(HERE.parent))
                why = "" if proc.returncode == 0 else f"export child exited {proc.returncode}: " + (
                    proc.stderr.strip().splitlines() or [""])[-1][:300]
            except subprocess.TimeoutExpired:
                why = f"export child timed out after {timeout:.0f} s"
            meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"model": name, "exports": {}}
            if why:  # the variants the child did not finish carry the crash as their error
                for v in todo:
                    if v not in meta.setdefault("exports", {}):
                        meta["exports"][v] = {"ok": False, "error": why, "crash": True}
                meta_path.parent.mkdir(parents=True, exist_ok=True)
                _write_json(meta_path, meta)
        ex = meta.get("exports", {})
        lines.append(f"{name:24s} " + "  ".join(f"{v}:{'ok' if ex.get(v, {}).get('ok') else 'FAIL'}" for v in variants
                                               if v in ex))
        say(lines[-1])
    return lines


def time_original(name: str, ours: Path, n: int, threads: int) -> dict[str, Any]:
    """Child (in .venv-zoo): the original ``nn.Module`` the zoo exported (rebuilt from its seed)
    and opbridge's module converted from that export (``ours``: model.py, weights.npz,
    meta.json as bench/peers writes them), in this one process: same torch, thread count and
    inputs, each warmed up, then timed alternately under ``torch.inference_mode`` (issue 25:
    the framework's own kernels set the floor a PyTorch artifact is held to)."""
    import logging
    import statistics
    import warnings

    import numpy as np
    import torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(threads)
    sys.path.insert(0, str(HERE / "peers"))
    from _model_onnx2torch import WARMUP, load_ours

    model, keys, _, _ = build(name)
    with np.load(CACHE / name / "inputs.npz", allow_pickle=False) as z:
        feeds = {k: z[k] for k in z.files}
    mine, meta = load_ours(ours)
    runs = {"original": (model, [torch.from_numpy(feeds[k]) for k in keys]),
            "ours": (mine, [torch.from_numpy(np.asarray(feeds[k]).astype(meta["input_dtypes"].get(k, feeds[k].dtype)))
                            for k in meta["input_names"]])}
    times: dict[str, list[float]] = {k: [] for k in runs}
    with torch.inference_mode():
        for mod, a in runs.values():
            for _ in range(WARMUP):
                mod(*a)
        for _ in range(n):
            for key, (mod, a) in runs.items():
                t = time.perf_counter()
                mod(*a)
                times[key].append(time.perf_counter() - t)
    return {"original_s": statistics.median(times["original"]), "ours_s": statistics.median(times["ours"]),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", nargs="?", choices=("build",), help="export the zoo into bench/.cache/zoo")
    ap.add_argument("--list", action="store_true", help="print the model names")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model's export child")
    ap.add_argument("--force", action="store_true", help="re-export variants already in meta.json")
    a = ap.parse_args(argv)
    if a.list or not a.cmd:
        print("\n".join(f"{n:24s} {SPECS[n][0]:8s} {SPECS[n][1]}" for n in MODELS))
        return 0
    names = [n.strip() for n in a.only.split(",")] if a.only else list(MODELS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}")
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variant(s) {bad}; known: {', '.join(VARIANTS)}")
    print("\n".join(build_all(names, variants, a.timeout, a.force)))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_export"]:
        export_one(sys.argv[2], sys.argv[3].split(","))
    elif sys.argv[1:2] == ["_time"]:  # _time NAME OURS_DIR N THREADS: one JSON line
        print(json.dumps(time_original(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
    else:
        sys.exit(main())
