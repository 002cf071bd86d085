"""``python -m translator.cli``: the ``opbridge`` command (one module object for ``main``)."""
from __future__ import annotations

import sys

from .main import main

sys.exit(main())
