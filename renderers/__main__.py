"""``python -m renderers``: see ``renderers._cli``."""

import sys

from ._cli import main

# Render workers are spawned and import the parent's __main__ module: only run when executed.
if __name__ == "__main__":
    sys.exit(main())
