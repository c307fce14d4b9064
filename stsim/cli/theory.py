"""``stsim theory``: Theorems 1–3 (docs/theory.md §6; Theorem 3, length generalisation, with
``--T_test``) checked on the reduced population dynamics and on the model's W and V
(:func:`stsim.theory.checks.check_theorem`), and the theory figures
(:mod:`stsim.theory.figures`, with ``--figures DIR``).

Exit status (:data:`stsim.theory.report.EXIT`): 0 only when every hypothesis of the theorem
checked holds and every check ran (at least one on the model) and passed; 3 when a
hypothesis of the theorem fails (the theorem claims nothing there; the checks still run and
are printed, and one that fails there, e.g. a diverging step, does not change the status);
else 1 when a check that ran failed; 4 when the result is not verified (a check
did not run, e.g. ``--full_steps 0`` or ``--grad_points 0``); 2 for invalid options — and
for a check estimated to need more CPU time than ``--max_seconds`` or more memory than this
machine has (refused before any work, with the estimate)."""
from __future__ import annotations

import json
import sys

from stsim.cli.common import int_tuple
from stsim.theory.checks import check_theorem, theorem_defaults
from stsim.util.io import check_writable_folder

__all__ = ["add_arguments", "main"]

EPILOG = ("exit status: 0 verified (every hypothesis holds, every check ran, on the model "
          "too, and passed); 3 a hypothesis of the theorem fails (it claims nothing "
          "there; this wins over a failed check); 1 a check failed; 4 not verified (a "
          "check did not run); 2 invalid options or a check refused as too costly\n"
          "examples: stsim theory --T-test 16,24                  # fixed PE: OOD stays >= F\n"
          "          stsim theory --pe stochastic --T-test 16,24   # stochastic: OOD -> 0\n"
          "          stsim theory --pe stochastic --T-test 12     # Theorem 2, T=9, d_e=12\n"
          "          stsim theory --T 20 --q 3 --d 5 --json\n"
          "          stsim theory --figures runs/theory        # the figures of docs/theory.md")


def add_arguments(p) -> None:
    """Options of ``stsim theory``."""
    p.add_argument("--T", type=int, default=None,
                   help="sequence length (default: 12 for onehot, 9 for stochastic)")
    p.add_argument("--q", type=int, default=2, help="subset size (default: 2)")
    p.add_argument("--d", type=int, default=3, help="token dimension (default: 3)")
    p.add_argument("--lr", type=float, default=None,
                   help="GD step (default: 1/(20 d^2), Theorem 1's largest)")
    p.add_argument("--eps", type=float, default=None,
                   help="target loss (default: half of Theorem 1's bound dT/(100(T-q)q))")
    p.add_argument("--pe", default="onehot", help="onehot | stochastic (slots) "
                   "(default: onehot)")
    p.add_argument("--d_e", "--d-e", dest="d_e", type=int, default=None,
                   help="slots width (default: max(T + ceil(T/3), T_test): d_e > T so that "
                        "the law is really stochastic, small enough to enumerate)")
    p.add_argument("--query", default="sum", help="sum | mean (default: sum)")
    p.add_argument("--T_test", "--T-test", dest="T_test", type=int_tuple, default=(),
                   metavar="LIST", help="comma-separated OOD lengths > T, e.g. 16,24; checks the "
                   "length-generalisation statement of the encoding (ood_to_zero or "
                   "fixed_ood_floor) there (default: none)")
    p.add_argument("--max_steps", "--max-steps", dest="max_steps", type=int, default=None,
                   help="reduced GD steps (default: 2x the predicted t_eps)")
    p.add_argument("--full_steps", "--full-steps", dest="full_steps", type=int, default=2000,
                   help="full-matrix population GD steps for the invariants, 0 = skip (the "
                        "result is then not verified) (default: 2000)")
    p.add_argument("--grad_points", "--grad-points", dest="grad_points", type=int, default=4,
                   help="points of the trajectory where the gradient of every block is "
                        "estimated, 0 = skip (the result is then not verified) (default: 4)")
    p.add_argument("--grad_samples", "--grad-samples", dest="grad_samples", type=int,
                   default=20000, help="Monte-Carlo samples per point (default: 20000)")
    p.add_argument("--n_mc", "--n-mc", dest="n_mc", type=int, default=20000,
                   help="Monte-Carlo samples per OOD estimate (default: 20000)")
    p.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    p.add_argument("--max_seconds", "--max-seconds", dest="max_seconds", type=float,
                   default=600.0, help="refuse a check estimated to need more CPU seconds "
                   "(default: 600); the estimate is printed first when above 10 s")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    g = p.add_argument_group("figures (instead of the check)")
    g.add_argument("--figures", default=None, metavar="DIR",
                   help="draw theory_loss.png, theory_a_gamma.png and theory_invariants.png "
                        "into DIR (the other options are not used)")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="with --figures: small version, seconds (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="with --figures: the version of docs/theory.md (minutes)")
    p.set_defaults(mode="quick")


def main(args) -> int:
    """Run :func:`check_theorem` from parsed arguments and print the report (or draw the
    figures with ``--figures``)."""
    if args.figures is not None:
        from stsim.theory.figures import draw_theory_figures
        out = check_writable_folder(args.figures, "--figures")     # created if missing
        for path in draw_theory_figures(out, quick=args.mode == "quick"):
            print(path)
        return 0
    T, lr, eps = theorem_defaults(args.pe, d=args.d, q=args.q, T=args.T, lr=args.lr,
                                  eps=args.eps)
    rep = check_theorem(T, args.q, args.d, lr, eps, pe=args.pe, d_e=args.d_e,
                        query=args.query, max_steps=args.max_steps,
                        full_steps=args.full_steps, T_test=args.T_test, n_mc=args.n_mc,
                        grad_points=args.grad_points, grad_samples=args.grad_samples,
                        seed=args.seed, max_seconds=args.max_seconds,
                        log=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(rep.to_dict(), indent=2) if args.json else rep.format())
    return rep.exit_code
