"""``python -m seglog``: the seglog command-line tool (see :mod:`seglog.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
