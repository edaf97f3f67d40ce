#!/usr/bin/env bash
# The checks that need a CUDA device, in one run (issue #18, goal 4).
#
#   bash benchmarks/cuda_check.sh OUTDIR [PYTHON]
#
# 1. the torch tests with CUDA visible: none of them may be skipped for want of CUDA;
# 2. `python -m benchmarks --cases torch_son` (method="torch" on CPU and CUDA against the
#    numba methods, certified KKT <= 1e-6), writing torch_results.json and the PNG;
# 3. `python -m benchmarks.large_knn` at N = 10^5, few clusters: numba ADMM against
#    method="torch" on CUDA in float64 and float32, writing large_knn.json and the PNG.
# Needs PyTorch with CUDA, and what `pip install -e .` installs (cvxpy is not used).
# Exits non-zero when CUDA is missing, a test fails, or a CUDA test was skipped.
set -u -o pipefail
out=${1:?usage: bash benchmarks/cuda_check.sh OUTDIR [PYTHON]}
py=${2:-python3}
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/convexfl-numba-cache} PYTHONUNBUFFERED=1
mkdir -p "$out"
"$py" -c "import torch; assert torch.cuda.is_available(), 'CUDA is not available'; \
print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())" \
    || exit 2
status=0
"$py" -m pytest -q -rs -p no:cacheprovider tests/test_torch_solver.py tests/test_torch.py \
    2>&1 | tee "$out/pytest.log" || status=1
if grep -q "CUDA is not available" "$out/pytest.log"; then
    echo "cuda_check: a CUDA test was skipped"; status=1
fi
"$py" -m benchmarks --cases torch_son --out "$out" || status=1
"$py" -m benchmarks.large_knn --sizes 100000 --regimes "few clusters" \
    --contenders "admm,torch cuda f64,torch cuda f32" --out "$out" || status=1
exit $status
