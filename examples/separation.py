"""Transformer vs fully-connected net: smallest width reaching the target loss against T.

Usage: python examples/separation.py [--quick|--full] [--out DIR] [--workers 2] [--qs 2,3]
Thin wrapper around :mod:`stsim.studies.separation.study` (also run by ``stsim separation``);
writes points.csv (one row per training run and budget), fits.json, summary.json,
report.md, separation.png and agreement.png. A rerun with the same --out resumes:
finished runs are not repeated.
"""
import sys

from stsim.studies.separation.study import cli_main


def main(argv=None) -> int:
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
