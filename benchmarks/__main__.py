"""``python -m benchmarks [--quick] [--out DIR] [--cases a,b,...]``, or
``python -m benchmarks setup-peers --ccmm-src PATH`` (optional peers: :mod:`benchmarks.peers`)."""

import argparse
import importlib.util
import sys

from . import large_knn, suite, torch_son, versus

DEFAULT = suite.CASES + versus.CASES + torch_son.CASES
ALL = DEFAULT + large_knn.CASES + versus.LARGE  # on request only: hours, minutes at full size


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["setup-peers"]:
        from .peers import setup_peers
        return setup_peers(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="convexfl solver benchmarks (table, JSON, PNG); "
                                 "'setup-peers --ccmm-src PATH' installs the optional peer CCMM")
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes, fewer path values (a few minutes)")
    ap.add_argument("--out", default="benchmarks/results",
                    help="directory for results.json, time_vs_n.png and the ccmm_* files")
    ap.add_argument("--cases", default=",".join(DEFAULT),
                    help=f"comma-separated subset of {','.join(ALL)} (default: all but "
                    f"{','.join(large_knn.CASES + versus.LARGE)})")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in ALL]
    if bad:
        ap.error(f"--cases: unknown {bad}; expected some of {list(ALL)}")
    own = [c for c in cases if c in suite.CASES]
    if own:
        suite.run(quick=args.quick, out=args.out, cases=own)
    peer = [c for c in cases if c in versus.CASES + versus.LARGE]
    if peer:
        versus.run(quick=args.quick, out=args.out, cases=peer)
    if any(c in torch_son.CASES for c in cases):
        if importlib.util.find_spec("torch") is None:
            print("[benchmarks] torch_son skipped: PyTorch is not installed "
                  "(pip install 'convexfl[torch]')", flush=True)
        else:
            torch_son.run(quick=args.quick, out=args.out)
    if "large_knn" in cases:
        large_knn.run(quick=args.quick, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
