"""Expressivity constructions and their width laws (q-sparse averaging, sparse patterns).

Usage: python examples/expressivity.py [--quick|--full] [--only curves,width,...] [--out DIR]
Thin wrapper around :mod:`stsim.experiments.expressivity` (also ``stsim expressivity``).
"""
import sys

from stsim.experiments.expressivity import cli_main

if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
