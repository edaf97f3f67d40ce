"""The benchmarks' warm-up compiles what their timed rows use (benchmarks.suite.warm_up)."""

import json
import subprocess
import sys

LARGE_ONLY = ["convexfl._flow_kernels.split_dual",
              "convexfl.solvers._ssnal_kernels.diagonal_blocks",
              "convexfl.solvers._block_ldl.block_factor"]

PROBE = """
import importlib, json, sys
from benchmarks.suite import warm_up
warm_up(large=sys.argv[1] == "large")
names = json.loads(sys.argv[2])
out = {}
for name in names:
    mod, fn = name.rsplit(".", 1)
    out[name] = len(getattr(importlib.import_module(mod), fn).signatures)
print(json.dumps(out))
"""


def _compiled(mode):
    out = subprocess.run([sys.executable, "-c", PROBE, mode, json.dumps(LARGE_ONLY)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_large_warm_up_compiles_the_kernels_of_large_problems():
    """In a fresh process, the tiny problems leave SSNAL's sparsified Newton systems and
    LDLᵀ solves and the flow search's split duals uncompiled (their first use would fall in
    a timed row); ``large=True`` compiles them."""
    tiny = _compiled("tiny")
    assert all(n == 0 for n in tiny.values()), tiny
    large = _compiled("large")
    assert all(n >= 1 for n in large.values()), large
