"""Claims map: each statement of the paper's Figs. 1-5, where it holds and where it fails.

Usage: python examples/claims_map.py [--quick|--full] [--out DIR] [--workers 2] [--set key=value]
Thin wrapper around :mod:`stsim.studies.figures.claims` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import claims


def main(argv=None) -> int:
    return claims.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
