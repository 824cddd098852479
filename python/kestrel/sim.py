"""Seeded simulation from a linear-Gaussian model (``kestrel simulate`` without
``--scenario``; scenarios are :func:`kestrel.simulate_scenario`).

Each track ``b`` is drawn from its own generator seeded by ``(seed, b)`` (a SplitMix64
finaliser of the two), so the numbers do not depend on the thread count and equal the
command line's files for the same model, seed and sizes:

    x_0 ~ N(x0, P0),  x_k = F x_{k-1} + u + w_k,  w_k ~ N(0, Q)
    z_k = H x_k + d + v_k,  v_k ~ N(0, R)

with Gaussian draws through a symmetric square root of ``Q``, ``R`` and ``P0`` (their
eigendecomposition: a singular ``Q`` is allowed). A measurement is missing (all NaN)
with probability ``missing``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from . import _kestrel
from ._arrays import flush_warnings, whole
from .likelihood import model_of


@dataclass
class Simulation:
    """Simulated ``truth`` [B, T, nx] and measurements ``z`` [B, T, ny] (float64, NaN
    where missing). Unpacks as ``truth, z = kestrel.simulate(...)``."""

    truth: np.ndarray
    z: np.ndarray

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.truth, self.z))


def simulate(model: Any, tracks: int, steps: int, seed: int = 0,
             missing: float = 0.0) -> Simulation:
    """``tracks`` independent trajectories of ``steps`` steps drawn from ``model`` and
    their noisy measurements, as ``kestrel simulate --model M --tracks B --steps T
    --seed S --missing P`` writes them (``--output`` and ``--truth``).

    ``model``: a :class:`KalmanFilter`, a ``kestrel.Model``, a model file path, or a
    :class:`ParticleFilter` (its nonlinear kinds simulate as ``kestrel simulate`` does
    for them).

    >>> import kestrel
    >>> kf = kestrel.KalmanFilter(F=[[1.0]], H=[[1.0]], Q=[[0.1]], R=[[1.0]])
    >>> truth, z = kestrel.simulate(kf, tracks=3, steps=100, seed=7)
    >>> truth.shape, z.shape
    ((3, 100, 1), (3, 100, 1))
    """
    tracks = whole(tracks, "tracks")
    steps = whole(steps, "steps")
    seed = whole(seed, "seed")
    if isinstance(missing, bool) or not isinstance(missing, (numbers.Real, np.floating)):
        raise TypeError(f"missing: expected a number, got {type(missing).__name__}")
    pf_model = getattr(_kestrel, "PfModel", None)
    inner = getattr(model, "model", None)
    if pf_model is not None and isinstance(inner, pf_model) and hasattr(model, "simulate"):
        truth, z = model.simulate(tracks, steps, seed=seed, missing=float(missing))
        return Simulation(truth=truth, z=z)
    m = model_of(model, varying=True)
    truth, z = _kestrel.simulate(m, tracks, steps, seed=seed, missing=float(missing))
    flush_warnings()
    return Simulation(truth=truth, z=z)
