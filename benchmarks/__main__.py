"""``python -m benchmarks [--quick] [--out DIR] [--cases a,b,...]``, or
``python -m benchmarks setup-peers --ccmm-src PATH`` (optional peers: :mod:`benchmarks.peers`)."""

import argparse
import sys

from .suite import CASES, run


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["setup-peers"]:
        from .peers import setup_peers
        return setup_peers(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="convexfl solver benchmarks (table, JSON, PNG)")
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes, fewer path values (a few minutes)")
    ap.add_argument("--out", default="benchmarks/results",
                    help="directory for results.json and time_vs_n.png")
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"comma-separated subset of {','.join(CASES)}")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"--cases: unknown {bad}; expected some of {list(CASES)}")
    run(quick=args.quick, out=args.out, cases=cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
