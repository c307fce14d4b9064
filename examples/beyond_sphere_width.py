"""Beyond the paper: sphere-PE width sweep (loss floor vs d_e) and theory vs practical model.

Usage: python examples/beyond_sphere_width.py [--quick|--full] [--out DIR] [--workers 2]
Thin wrapper around :mod:`stsim.studies.figures.beyond` (also run by ``stsim figures``).
"""
import sys

from stsim.studies.figures import beyond


def main(argv=None) -> int:
    return beyond.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
