"""Fig. 1: training loss, inverse loss, cosine similarity.

Usage: python examples/fig1_training.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.fig1` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import fig1


def main(argv=None) -> int:
    return fig1.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
