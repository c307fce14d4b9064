"""Fig. 5: Figs. 2 and 4 with Adam.

Usage: python examples/fig5_adam.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.fig5` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import fig5


def main(argv=None) -> int:
    return fig5.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
