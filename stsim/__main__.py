"""``python -m stsim`` — the same as the ``stsim`` command."""
import sys

from stsim.cli import main

sys.exit(main())
