"""``python -m sim``: see :mod:`sim.cli`."""
import sys

from sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
