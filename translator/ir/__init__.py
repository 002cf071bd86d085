"""The IR layer: the backend-neutral graph and what is known about its values.

Holds the IR itself (``graph``: ``Model``, ``Graph``, ``Node``, ``Value``, ``TensorType``),
shape and dtype inference (``infer``), symbolic dims (``dims``), identifier sanitizing
(``names``), one op evaluated through the NumPy reference under the budget (``evaluate``),
the garbage-collector pause for large graphs (``gcpause``) and onnxruntime sessions fed
with ml_dtypes values (``ort_run``).

May import: ``translator.table`` and ``translator.reference``.
"""
