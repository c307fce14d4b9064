"""All figures in one pool: the same as ``stsim figures``.

Usage: python examples/all_figures.py [--quick|--full] [--out DIR] [--workers 2]
"""
import sys

from stsim.cli import main as cli_main


def main(argv=None) -> int:
    return cli_main(["figures"] + list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
