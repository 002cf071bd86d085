"""The table layer, the bottom of ``translator/``: ``optable.yaml`` and ``dtypes.yaml`` as data.

Holds the strict loader (``loader``) and its line-numbered YAML nodes (``yamlnodes``), the
snippet grammar the cells are written in (``snippets``), the dtype helpers (``dtypes``), the
query index and the fast query path (``index``, ``quick``), and what every layer shares:
``errors`` (``OpbridgeError``, ``Unsupported``), ``paths`` (where the data files live),
``constants`` (column keys, aliases) and ``budget`` (the resource limits).

May import: nothing of ``translator`` outside this package. ``index``, ``quick``,
``constants`` and ``paths`` stay free of NumPy: they are ``opbridge query``'s fast path.
"""
