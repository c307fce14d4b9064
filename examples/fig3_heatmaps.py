"""Fig. 3: heat maps of W and V.

Usage: python examples/fig3_heatmaps.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.fig3` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import fig3


def main(argv=None) -> int:
    return fig3.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
