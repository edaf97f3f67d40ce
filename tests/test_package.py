import json
import subprocess
import sys

import convexfl as cfl


def test_import_does_not_pull_heavy_extras():
    code = ("import sys, convexfl, convexfl.losses, convexfl.graphs; "
            "print([m for m in ('torch', 'flwr', 'matplotlib', 'cvxpy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_public_api_names():
    for name in ("SumOfNorms", "SquaredPenalty", "Reduced", "solve", "Solution",
                 "from_paper_lambda", "global_model", "local_models", "oracle"):
        assert hasattr(cfl, name)
    for name in ("Quadratic", "LeastSquares", "Logistic", "SquaredHinge", "Huber", "Poisson"):
        assert hasattr(cfl.losses, name)
    assert callable(cfl.graphs.complete) and callable(cfl.graphs.knn)
    assert callable(cfl.clusters.labels) and callable(cfl.certificates.kkt_residual)


def test_demo_command_recovers_the_planted_clusters(tmp_path):
    out = tmp_path / "demo.json"
    proc = subprocess.run([sys.executable, "-m", "convexfl", "demo", "--json", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "same partition: True" in proc.stdout
    result = json.loads(out.read_text())
    lo, hi = result["theorem3_interval"]
    assert lo < result["lam"] < hi and result["kkt_residual"] < 1e-9
