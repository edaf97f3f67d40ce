"""Bad input gets a clear error naming the argument (foundation entry points)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl

L = cfl.losses
X4 = np.random.default_rng(0).standard_normal((4, 2))
Y4 = np.array([1.0, -1.0, 1.0, -1.0])
G4 = np.array([0, 0, 1, 1])

CASES = [
    (lambda: L.Quadratic([[1.0, np.nan]]), ValueError, "A: contains 1 NaN"),
    (lambda: L.Quadratic([1.0, 2.0]), ValueError, "A: expected a 2-D array"),
    (lambda: L.Quadratic(np.zeros((0, 2))), ValueError, "A: is empty"),
    (lambda: L.Quadratic([["a", "b"]]), TypeError, "A: expected a real numeric array"),
    (lambda: L.Quadratic(np.ones((2, 2)) * 1j), TypeError, "A: expected real numbers"),
    (lambda: L.Quadratic(X4, weights=[1, 1, 1]), ValueError, "weights: expected length 4"),
    (lambda: L.Quadratic(X4, weights=[1, 1, 1, 0]), ValueError, "weights: user weights must"),
    (lambda: L.Logistic.from_groups(X4, [1, 2, 1, 1], G4), ValueError,
     "y: labels must be -1 or +1"),
    (lambda: L.SquaredHinge.from_groups(X4, [0, 1, 0, 1], G4), ValueError,
     "y: labels must be -1 or +1"),
    (lambda: L.Logistic.from_groups(X4, Y4[:3], G4), ValueError, "y: has 3 entries but X has 4"),
    (lambda: L.Logistic.from_groups(X4, Y4, G4[:3]), ValueError,
     "groups: has 3 entries but X has 4"),
    (lambda: L.Logistic.from_groups(X4, Y4, G4, c=-1), ValueError, "c: must be >= 0"),
    (lambda: L.Logistic.from_groups(X4, Y4, G4, c=np.nan), ValueError, "c: must be finite"),
    (lambda: L.Logistic.from_groups(X4, Y4, G4, sample_weight=[1, 1, -1, 1]), ValueError,
     "sample_weight: weights must be >= 0"),
    (lambda: L.Logistic.from_groups(X4, Y4, G4, sample_weight=[1, 1]), ValueError,
     "sample_weight: has 2 entries"),
    (lambda: L.Poisson.from_groups(X4, [1, -1, 0, 2], G4), ValueError,
     "y: Poisson counts must be >= 0"),
    (lambda: L.Huber.from_groups(X4, Y4, G4, delta=0.0), ValueError, "delta: must be > 0"),
    (lambda: L.LeastSquares.from_groups(X4, [1, np.inf, 0, 0], G4), ValueError,
     "y: contains 1 NaN or infinite"),
    (lambda: L.LeastSquares.from_groups(X4, Y4, [0, np.nan, 1, 1]), ValueError,
     "groups: contains NaN"),
    (lambda: L.LeastSquares.from_users([X4[:2], np.zeros((0, 2))], [Y4[:2], []]), ValueError,
     "Xs: user 1 is empty"),
    (lambda: L.LeastSquares.from_users([X4], [Y4, Y4]), ValueError, "Xs, ys: expected equal"),
    (lambda: L.Quadratic(X4).prox(X4, 0.0), ValueError, "rho: proximal weights must be > 0"),
    (lambda: L.Quadratic(X4).prox(X4[:3], 1.0), ValueError, "V: expected shape"),
    (lambda: L.Quadratic(X4).hessian(7, X4[0]), ValueError, "i: user index must be in 0..3"),
    (lambda: L.Quadratic(X4).hessian(0, [1.0]), ValueError, "x: expected length 2"),
    (lambda: L.Quadratic(X4).values(np.zeros((4, 3))), ValueError, "X: expected shape (4, 2)"),
    (lambda: cfl.SumOfNorms(L.Quadratic(X4), cfl.graphs.complete(4), True), TypeError,
     "lam: expected a real number"),
    (lambda: cfl.SumOfNorms(L.Quadratic(X4), cfl.graphs.complete(4), 1.0, convention="x"),
     ValueError, "convention: expected one of"),
    (lambda: cfl.graphs.complete(2.5), TypeError, "n_users: expected an integer"),
    (lambda: cfl.datasets.planted_points(0), ValueError, "n_clusters: must be >= 1"),
]


@pytest.mark.parametrize("call, exc, message", CASES,
                         ids=[c[2].split(":")[0] + f"-{i}" for i, c in enumerate(CASES)])
def test_bad_input_is_refused_with_a_clear_message(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert message in str(info.value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=3, max_size=40))
def test_partition_labels_are_numbered_by_first_appearance(values):
    """The k-th distinct label met, in order, becomes ``k``: for integer labels in
    ``[0, 4N)`` (the one-pass path), the same labels shifted below 0 or beyond ``4N``, and
    as floats (``np.unique``); a shift does not change the numbering."""
    from convexfl._validation import check_partition

    lab = np.array(values)
    first = {}
    expected = [first.setdefault(v, len(first)) for v in values]
    for labels in (lab, lab - 5, lab + 1000, lab.astype(float)):
        out = check_partition(labels, len(values))
        assert out.dtype == np.int64 and out.tolist() == expected


def test_a_read_only_check_does_not_copy_but_still_refuses_bad_values():
    from convexfl._validation import as_float_array

    X = np.ones((3, 2))
    assert as_float_array(X, "X", copy=False) is X
    assert as_float_array(X, "X") is not X
    widened = as_float_array(np.ones((3, 2), np.float32), "X", copy=False)
    assert widened.dtype == np.float64 and widened.flags.c_contiguous
    strided = as_float_array(np.ones((2, 6))[:, ::2], "X", copy=False)
    assert strided.flags.c_contiguous
    with pytest.raises(ValueError, match="X: contains 1 NaN"):
        as_float_array(np.array([[1.0, np.nan]]), "X", copy=False)
