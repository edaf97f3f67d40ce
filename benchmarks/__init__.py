"""Speed and accuracy benchmarks of the convexfl solvers against the cvxpy reference.

Run ``python -m benchmarks --quick`` (a few minutes) or ``python -m benchmarks`` (full).
See :mod:`benchmarks.suite` for the cases and what is measured.
"""
