"""Fig. 2: OOD loss at longer T_test, stochastic vs fixed PE.

Usage: python examples/fig2_ood_length.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.fig2` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import fig2


def main(argv=None) -> int:
    return fig2.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
