"""Sparse Boolean functions: sample complexity against T, one attention head vs an FCN.

Usage: python examples/sparse_functions.py [--quick|--full] [--out DIR] [--workers 2]
                                           [--Ts 16,32] [--fns and:3,majority:3,parity:2]
Thin wrapper around :mod:`stsim.studies.sparse.study` (also run by ``stsim sparse``);
writes trials.csv (one row per trial), mstar.csv, fits.json, report.md, summary.json,
sparse_heatmap.png (success probability over (T, m)) and sparse_mstar.png (m* against T
for both models). A rerun with the same --out resumes: finished trials are not repeated.
"""
import sys

from stsim.studies.sparse.study import cli_main


def main(argv=None) -> int:
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
