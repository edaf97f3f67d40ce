"""Speed and accuracy benchmarks of the convexfl solvers against the cvxpy reference.

Run ``python -m benchmarks --quick`` (a few minutes) or ``python -m benchmarks`` (full).
See :mod:`benchmarks.suite` for the cases and what is measured. The cases against the peer
CCMM (:mod:`benchmarks.versus`) need the optional CCMMPy (:mod:`benchmarks.peers`); without
it they print a "skipped" row.
"""
