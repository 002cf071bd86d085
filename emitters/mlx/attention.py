"""MLX rules: ONNX Attention (the ``mlx`` cell's fused call covers 4-D MHA only)."""
from __future__ import annotations

from translator.compile.render import literal

from .codegen import NodeEmit
from .registry import rule


@rule("attention")
def attention(e: NodeEmit) -> list[str]:
    """The shared ``_attention`` helper over ``mlx.core`` (heads from 3-D inputs, GQA/MQA, KV cache, masks,
    causal and windowed, nonpad lengths, softcap, qk_matmul_output_mode); the outputs the node has."""
    ins = [e.x(i) if e.v(i) is not None else "None" for i in range(7)]
    scale = e.attr("scale")
    args = ["mx", "mx.softmax"] + ins + [literal(int(e.attr("q_num_heads") or 0)), literal(int(e.attr("kv_num_heads") or 0)),
                  literal(None if scale is None else float(scale)), literal(float(e.attr("softcap") or 0.0)),
                  literal(bool(e.attr("is_causal"))), literal(int(e.attr("left_window_size"))),
                  literal(int(e.attr("right_window_size"))), literal(int(e.attr("qk_matmul_output_mode") or 0))]
    outs = e.outs
    call = f"{e.helper('_attention')}({', '.join(args)})"
    return [f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}[:{len(outs)}]"]
