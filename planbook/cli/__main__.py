"""``python -m planbook.cli``: the ``planbook`` command."""

import sys

from . import main

sys.exit(main())
