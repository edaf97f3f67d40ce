"""``python -m theory_checks``: run the checks and write the report."""

import argparse
import os
import sys

from convexfl._extras import require

from . import REGISTRY, run_checks, write_report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m theory_checks", description=__doc__)
    p.add_argument("--list", action="store_true", help="print the check ids, one per line")
    p.add_argument("--quick", action="store_true", help="few instances (a few minutes in all)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only these checks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="also write the results JSON here")
    p.add_argument("--out", default="theory-checks", help="report folder (default %(default)s)")
    p.add_argument("--fresh", action="store_true", help="ignore finished checks in --out")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if a.list:
        print("\n".join(REGISTRY))
        return 0
    try:
        require("the theory checks", "plot", "stats")
        if a.json and os.path.isdir(a.json):
            raise ValueError(f"--json: {a.json!r} is a folder; give a file name")
        results = run_checks(a.only, quick=a.quick, seed=a.seed, out=a.out,
                             resume=not a.fresh, progress=not a.no_progress)
    except ValueError as exc:
        print(f"theory_checks: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"theory_checks: interrupted; finished checks are kept in {a.out!r}: run the "
              "same command again to resume", file=sys.stderr)
        return 130
    report = write_report(results, a.out, a.json)
    width = max(len(r.id) for r in results)
    for r in results:
        print(f"{r.id:<{width}}  {r.outcome:<12}  control: {r.control.outcome} "
              f"(expected {r.control.expected})")
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
