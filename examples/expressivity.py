"""Expressivity constructions and their width laws (q-sparse averaging, sparse patterns).

Usage: python examples/expressivity.py [--quick|--full] [--only curves,width,...] [--out DIR]
Thin wrapper around :mod:`stsim.studies.expressivity.study` (also ``stsim expressivity``).
"""
import sys

from stsim.studies.expressivity.study import cli_main

if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
