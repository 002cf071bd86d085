"""Graph passes, one cross-cutting concern per file, each with its test beside it in tests/.

``verify`` (types, shapes, attribute constraints; run before any emitter),
``fold_constants`` (shape subgraphs), ``legalize_dtypes`` (driven by the backend's
dtype column).
``layout`` (channels-first → channels-last with the fewest transposes, for TF/TFLite).
"""
