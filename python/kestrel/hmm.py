"""Hidden Markov models: a finite-state Markov chain seen through categorical codes or
Gaussian vectors. Filtered and smoothed state distributions, per-step log-likelihoods and
the Viterbi path, batched over tracks, sequential or parallel in time (Sarkka &
Garcia-Fernandez's Definitions 1-2 for a finite state; the max-product scan), on the CPU
or a GPU. As ``kestrel hmm``.

Conventions: ``transition[i, j] = p(x_t = j | x_{t-1} = i)`` (rows sum to 1);
``initial`` is the distribution at step 0 *before* observation 0. Observations are
batch-first ``[B, T, ny]`` (``[T, ny]`` is one track; categorical codes ``[B, T, 1]`` or
``[T, 1]``, integers or floats); NaN marks a missing observation (log-likelihood 0).
Viterbi ties go to the smallest last state, then the smallest state before it, and so on
back, in both methods.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _kestrel
from ._arrays import as_float, flush_warnings, precision_dtype, to_numpy


@dataclass
class CategoricalEmission:
    """``p(y = c | x = i) = probs[i, c]``: ``probs`` [K, M], rows summing to 1."""

    probs: Any


@dataclass
class GaussianEmission:
    """``y | x = i ~ N(means[i], covs[i])``: ``means`` [K, ny], ``covs`` [K, ny, ny]."""

    means: Any
    covs: Any


@dataclass
class HmmResult:
    """``filtered`` and ``smoothed`` [B, T, K], ``loglik`` [B, T] (``log p(y_t |
    y_0..t-1)``), ``path`` [B, T] (int64; the Viterbi path). Without the batch axis when
    the observations had none."""

    filtered: np.ndarray
    smoothed: np.ndarray
    loglik: np.ndarray
    path: np.ndarray


def _f64(x: Any, name: str) -> np.ndarray:
    a, _ = to_numpy(x, name)
    return np.ascontiguousarray(as_float(a, name, np.float64))


class HiddenMarkovModel:
    """A hidden Markov model: ``transition`` [K, K] (row = from), ``initial`` [K] and
    ``emission``: a :class:`CategoricalEmission`, a :class:`GaussianEmission`, or a dict
    ``{"kind": "categorical", "probs": ...}`` / ``{"kind": "gaussian", "means": ...,
    "covs": ...}``. Checked at once (``ModelError`` names the field)."""

    def __init__(self, transition: Any, initial: Any, emission: Any) -> None:
        self.transition = _f64(transition, "transition")
        self.initial = _f64(initial, "initial")
        if isinstance(emission, CategoricalEmission):
            emission = {"kind": "categorical", "probs": emission.probs}
        elif isinstance(emission, GaussianEmission):
            emission = {"kind": "gaussian", "means": emission.means, "covs": emission.covs}
        if not isinstance(emission, dict) or "kind" not in emission:
            raise TypeError(
                "emission: expected CategoricalEmission, GaussianEmission or a dict with 'kind'"
            )
        unknown = set(emission) - {"kind", "probs", "means", "covs"}
        if unknown:
            raise ValueError(f"emission: unknown keys {sorted(unknown)}")
        self.kind: str = str(emission["kind"])
        self.probs = _f64(emission["probs"], "probs") if "probs" in emission else None
        self.means = _f64(emission["means"], "means") if "means" in emission else None
        self.covs = _f64(emission["covs"], "covs") if "covs" in emission else None
        k, ny = _kestrel.hmm_check(
            self.transition, self.initial, self.kind, self.probs, self.means, self.covs
        )
        self.states: int = k
        self.ny: int = ny

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> "HiddenMarkovModel":
        """Reads a model file (``[hmm]``, as ``kestrel hmm --model``)."""
        p = os.fspath(path)
        with open(p, encoding="utf-8") as f:
            return cls.from_toml_str(f.read(), p)

    @classmethod
    def from_toml_str(cls, text: str, origin: str = "<string>") -> "HiddenMarkovModel":
        """From a model file's text."""
        d = _kestrel.hmm_from_toml(text, origin)
        emission = {k: v for k, v in d.items() if k not in ("transition", "initial")}
        return cls(d["transition"], d["initial"], emission)

    def __repr__(self) -> str:
        return f"HiddenMarkovModel(states={self.states}, ny={self.ny}, emission={self.kind!r})"

    def run(
        self,
        obs: Any,
        *,
        method: str = "sequential",
        scan: str = "fastest",
        precision: str | None = None,
        device: str = "cpu",
    ) -> HmmResult:
        """Everything at once: ``kestrel hmm``. ``method`` is ``"sequential"`` or
        ``"parallel"``; ``scan`` the parallel method's scan algorithm (``"fastest"``,
        ``"blelloch"``, ``"hillis-steele"``, ``"ladner-fischer"``, ``"sengupta:N"``,
        ``"sequential"``); ``precision`` ``"f32"``/``"f64"`` (default: the input's float
        type, float64 for integer codes)."""
        a, _ = to_numpy(obs, "obs")
        one = a.ndim == 2
        if one:
            a = a[None]
        if a.ndim != 3:
            raise ValueError(f"obs: expected [B, T, ny] or [T, ny], got shape {a.shape}")
        dtype = precision_dtype(precision, a, "cpu")
        a = as_float(a, "obs", dtype)
        try:
            d = _kestrel.hmm_run(
                self.transition,
                self.initial,
                self.kind,
                self.probs,
                self.means,
                self.covs,
                a,
                method=method,
                scan=scan,
                device=device,
            )
        finally:
            flush_warnings()
        if one:
            d = {k: v[0] for k, v in d.items()}
        return HmmResult(d["filtered"], d["smoothed"], d["loglik"], d["path"])

    def filter(self, obs: Any, **kw: Any) -> np.ndarray:
        """``p(x_t | y_0..t)`` [B, T, K] (keywords as :meth:`run`)."""
        return self.run(obs, **kw).filtered

    def smooth(self, obs: Any, **kw: Any) -> np.ndarray:
        """``p(x_t | y_0..T-1)`` [B, T, K]."""
        return self.run(obs, **kw).smoothed

    def loglik(self, obs: Any, **kw: Any) -> np.ndarray:
        """``log p(y_t | y_0..t-1)`` [B, T]."""
        return self.run(obs, **kw).loglik

    def viterbi(self, obs: Any, **kw: Any) -> np.ndarray:
        """The Viterbi path [B, T] (int64)."""
        return self.run(obs, **kw).path

    path = viterbi
