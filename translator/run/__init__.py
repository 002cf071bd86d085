"""The run layer: convert, check and report a whole model; run what was written.

Holds ``convert`` (frontend → compile → emit, written atomically), ``check`` (a model's
outputs against its source framework's runtime and the NumPy reference), ``report`` (what a
target would do with a model, without emitting; the table's support matrix), the harness
that runs one compiled graph on a backend and compares (``harness``), reading and writing
artifacts and their inputs (``artifact_io``), the catalog behind ``opbridge query``/``ops``/
``backends`` (``catalog``), the sample inputs of each op (``samples``) and the one-line
terminal messages (``terminal``).

May import: ``translator.table``, ``translator.reference``, ``translator.ir``,
``translator.compile`` and ``translator.frontends``.
"""
