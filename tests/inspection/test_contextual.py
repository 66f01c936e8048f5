"""The map of cosine distances that the contextual figure draws, against scikit-learn's SMACOF."""

import warnings

import numpy as np
import pytest

from attnkit.inspection.contextual import cosine_map, cosine_matrix

RNG = np.random.default_rng(0)


def _apart(places: np.ndarray) -> np.ndarray:
    return np.linalg.norm(places[:, None] - places[None], axis=-1)


def _cosine_distances(x: np.ndarray) -> np.ndarray:
    d = np.clip(1.0 - cosine_matrix(x), 0.0, 2.0)
    np.fill_diagonal(d, 0.0)
    return (d + d.T) / 2


def test_the_map_unweighted_is_scikit_learns_smacof_from_classical_scaling():
    """Every pair counted once: the distances of scikit-learn's metric SMACOF, started from its classical
    scaling, to 1e-4 (places agree up to a turn or a mirror, which SMACOF leaves free)."""
    manifold = pytest.importorskip("sklearn.manifold")
    x = RNG.normal(size=(14, 24)) + RNG.normal(size=24)  # a shared direction: cosines spread, as in a layer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's notes on its changing defaults
        mds = manifold.MDS(n_components=2, metric=True, dissimilarity="precomputed", init="classical_mds",
                           n_init=1, max_iter=5000, eps=1e-12)  # fmt: skip
        reference = mds.fit_transform(_cosine_distances(x))
    assert np.abs(_apart(cosine_map(x, steps=5000)) - _apart(reference)).max() < 1e-4


def test_the_kept_tokens_distances_are_their_cosine_distances():
    """The pairs among the kept tokens at their cosine distances (to 0.01), in the cosines' order, where
    the map of every pair counted once is off by more; the others still near theirs (rank order)."""
    x = RNG.normal(size=(16, 32)) + 0.8 * RNG.normal(size=32)
    keep = [2, 7, 11]
    d = _cosine_distances(x)
    pairs = [(a, b) for k, a in enumerate(keep) for b in keep[k + 1 :]]
    true = np.array([d[a, b] for a, b in pairs])
    kept, plain = _apart(cosine_map(x, keep)), _apart(cosine_map(x))
    assert np.abs(np.array([kept[a, b] for a, b in pairs]) - true).max() < 0.01
    assert np.abs(np.array([plain[a, b] for a, b in pairs]) - true).max() > 0.01
    assert np.argsort([kept[a, b] for a, b in pairs]).tolist() == np.argsort(true).tolist()
    upper = np.triu_indices(len(x), 1)
    ranks = lambda v: np.argsort(np.argsort(v))
    assert np.corrcoef(ranks(kept[upper]), ranks(d[upper]))[0, 1] > 0.6


def test_the_map_spreads_most_across_and_is_centred():
    """Turned to its main axes: the wider spread across, centred on 0, uncorrelated axes."""
    places = cosine_map(RNG.normal(size=(12, 8)))
    assert np.allclose(places.mean(0), 0.0, atol=1e-9)
    assert places[:, 0].var() >= places[:, 1].var()
    assert abs(np.cov(places.T)[0, 1]) < 1e-9


def test_identical_vectors_share_a_place():
    """A word's static vector wherever it stands: one vector, one place (distance 0, to 1e-6)."""
    x = RNG.normal(size=(6, 10))
    x[4] = x[1]
    assert _apart(cosine_map(x, [1, 4]))[1, 4] < 1e-6
