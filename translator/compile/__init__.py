"""The compile layer: one pipeline that lowers the IR for any target.

Holds the ``Target`` (``target``: a backend as data, found by its package name under
``emitters/``), the one registry keyed by (op, backend) (``registry``), lowering through
native rules, table decompositions and refusals (``lowering``), the pass pipeline
(``pipeline``) and its passes (``passes/``: layout, dtype legalization, constant folding,
shape values, control flow, requantize, verify), loop unrolling (``unroll``,
``unroll_loop``), the whole-graph NumPy interpreter (``interpreter``: it lowers first, so it
lives here), literal rendering for generated code (``render``) and the table lint (``lint``).

May import: ``translator.table``, ``translator.reference``, ``translator.ir``, and the
backend packages under ``emitters/`` (a ``Target`` loads its own).
"""
