"""Fig. 4: length generalisation and unseen q_test.

Usage: python examples/fig4_generalisation.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.fig4` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import fig4


def main(argv=None) -> int:
    return fig4.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
