"""``python -m sim``: see :mod:`sim.cli`."""
import sys

from sim.cli import main
from softfloat16.console import run_entry_point

if __name__ == "__main__":
    sys.exit(run_entry_point(main))
