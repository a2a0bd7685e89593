"""``python -m sim.crosscheck``: the same as ``python -m sim crosscheck`` (see :mod:`sim.crosscheck.cli`)."""
import sys

from sim.crosscheck.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
