"""``python -m sim.crosscheck``: the same as ``python -m sim crosscheck`` (see :mod:`sim.crosscheck.cli`)."""
import sys

from sim.crosscheck.cli import main
from softfloat16.console import run_entry_point

if __name__ == "__main__":
    sys.exit(run_entry_point(lambda: main(sys.argv[1:])))
