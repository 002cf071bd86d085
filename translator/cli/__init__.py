"""The command line, the top of ``translator/``: ``opbridge …`` (``python -m translator.cli``).

Holds the argument parsers, the fast query commands and the framework log filters
(``main``), and the model commands ``convert``, ``check`` and ``report`` (``models``).

May import: every other package of ``translator``.
"""
