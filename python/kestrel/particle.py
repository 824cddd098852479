"""The particle filter family: the bootstrap (sequential importance resampling) filter
of Gordon, Salmond & Smith (1993) for B independent tracks of N particles each, on the
CPU or a CUDA GPU (``kestrel pf``).

Each step ``k`` moves every particle through the model's dynamics (step 0 draws it from
the prior), weights it by the measurement likelihood ``w_i ∝ w_i p(z_k | x_i)`` and
reports the weighted mean and covariance of the particles, the log-likelihood estimate
``ln p^(z_k | z_0:k-1) = ln(sum_i w_i p(z_k | x_i) / sum_i w_i)`` and the effective
sample size ``ESS = (sum w)^2 / sum w^2`` (Kong, Liu & Wong 1994) before resampling; it
resamples when ``ESS < ess N`` (Doucet & Johansen 2011, "A tutorial on particle
filtering and smoothing", section 3.5). A missing measurement (NaN in any component)
only moves the particles; its log-likelihood term is 0.

Resamplers (Hol, Schon & Gustafsson 2006; Murray, Lee & Jacob 2016 for Metropolis and
rejection; Hendeby et al. 2007 for the grid selection and resampling in subsets):
systematic, stratified, multinomial, residual, metropolis[:B], rejection,
systematic:grid, stratified:grid, subsets[:S].

Random numbers are Philox 4x32-10 (Salmon et al. 2011) keyed by the seed and by
(particle, track, step): the same seed gives the same result on any number of threads,
and (to rounding) on the GPU.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _kestrel
from ._arrays import flush_warnings, matrix, vector
from .kalman import _host, measurements


@dataclass
class PfResult:
    """Estimates of a batch, named as ``kestrel pf``'s NPZ keys: ``mean`` [B, T, nx]
    and ``cov`` [B, T, nx, nx] (the weighted moments of the particles after the step-k
    update), ``loglik`` [B, T] (the per-step log-likelihood estimates), ``ess`` [B, T]
    (the effective sample size before resampling). With ``keep_particles=True``:
    ``particles`` [B, N, nx] after the last step and their normalised ``weights``
    [B, N] (else None). The B axis is absent when the measurements were one track.
    ``device`` is where it ran."""

    mean: Any
    cov: Any
    loglik: Any
    ess: Any
    particles: Any
    weights: Any
    device: str

    @property
    def total_loglik(self) -> float:
        """The sum of the per-step log-likelihood estimates over every step and track
        (an unbiased estimate of the likelihood in its exponent, Del Moral 2004)."""
        return float(np.asarray(_host(self.loglik), dtype=np.float64).sum())


def _toml_value(v: Any) -> str:
    """A number, vector or matrix in TOML (floats written exactly by ``repr``)."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        x = float(a)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    return "[" + ", ".join(_toml_value(r) for r in a) + "]"


def _number(x: Any, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {type(x).__name__}")
    return float(x)


def _prior_toml(x0: Any, P0: Any, p0: Any) -> str:
    lines = ["[prior]"]
    if x0 is not None:
        lines.append(f"x0 = {_toml_value(vector(x0, 'x0'))}")
    if P0 is not None and p0 is not None:
        raise ValueError("P0 and p0: give one of them (P0 a matrix, p0 = s for s I)")
    if P0 is not None:
        lines.append(f"P0 = {_toml_value(matrix(P0, 'P0'))}")
    if p0 is not None:
        lines.append(f"p0 = {_toml_value(_number(p0, 'p0'))}")
    return "\n".join(lines) + "\n"


class ParticleFilter:
    """A model of the bootstrap particle filter and the filter itself.

    Kinds (the model file's ``[model] kind``; see ``examples/*.toml``):

    - linear-Gaussian (any model of :class:`kestrel.KalmanFilter`): ``x_k = F x_{k-1} +
      u + w``, ``z_k = H x_k + d + v``;
    - ``range-only`` / ``bearings-only``: a 2-D constant-velocity target ``[px, vx, py,
      vy]`` (white-noise acceleration of density ``q`` over ``dt``), sensors measuring
      ``|p - s_j|`` or ``atan2(py - s_y, px - s_x)`` with variance ``r``;
    - ``range-bearing``: a radar measuring ``[range, bearing]``;
    - ``stochastic-volatility``: ``x_k = mu + phi (x_{k-1} - mu) + sigma v_k``,
      ``z_k ~ N(0, exp(x_k))``, prior the stationary law;
    - ``custom``: CUDA C++ device functions (GPU only; model file only).

    >>> import kestrel
    >>> pf = kestrel.ParticleFilter.range_only(sensors=[[0, 0], [150, 40]], r=1.0, q=0.05,
    ...                                        x0=[20, 1, 100, -0.3], p0=1.0)
    >>> truth, z = pf.simulate(tracks=2, steps=50, seed=1)
    >>> pf.filter(z, particles=1000, device="cpu").mean.shape
    (2, 50, 4)
    """

    def __init__(self, model: "_kestrel.PfModel"):
        if not isinstance(model, _kestrel.PfModel):
            raise TypeError(
                "model: expected a kestrel PfModel (use ParticleFilter.from_toml, "
                f"from_kalman or a kind's constructor), got {type(model).__name__}"
            )
        self._model = model

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> "ParticleFilter":
        """Reads a model file: every kind ``kestrel pf --model`` reads (explicit,
        cv, ca, random-walk, ar, range-only, bearings-only, range-bearing,
        stochastic-volatility, custom)."""
        return cls(_kestrel.PfModel.from_toml(os.fspath(path)))

    @classmethod
    def from_toml_str(cls, text: str, origin: str = "<string>") -> "ParticleFilter":
        """Parses a model from TOML text (``origin`` names it in errors and locates a
        custom model's ``source``)."""
        return cls(_kestrel.PfModel.from_toml_str(text, origin))

    @classmethod
    def from_kalman(cls, kf: Any) -> "ParticleFilter":
        """The particle filter of a linear-Gaussian model: a :class:`kestrel.KalmanFilter`
        or a native ``kestrel.Model`` (the same prior, dynamics and likelihood)."""
        model = getattr(kf, "model", kf)
        if not isinstance(model, _kestrel.Model):
            raise TypeError(
                f"kf: expected a kestrel.KalmanFilter or kestrel.Model, got {type(kf).__name__}"
            )
        return cls(_kestrel.PfModel.from_linear(model))

    @classmethod
    def _kind(cls, kind: str, keys: dict[str, str], prior: str) -> "ParticleFilter":
        lines = ["[model]", f'kind = "{kind}"'] + [f"{k} = {v}" for k, v in keys.items()]
        return cls.from_toml_str("\n".join(lines) + "\n" + prior, origin=f"<{kind}>")

    @classmethod
    def range_only(cls, sensors: Any, r: float, q: float, x0: Any, P0: Any = None,
                   p0: float | None = None, dt: float = 1.0) -> "ParticleFilter":
        """Sensors at ``sensors`` [S, 2] measure the range to a 2-D constant-velocity
        target with variance ``r`` each; keywords as the model file names them (``P0``
        a matrix, or ``p0 = s`` for ``s I``)."""
        keys = {"dt": _toml_value(_number(dt, "dt")), "q": _toml_value(_number(q, "q")),
                "sensors": _toml_value(matrix(sensors, "sensors")),
                "r": _toml_value(_number(r, "r"))}
        return cls._kind("range-only", keys, _prior_toml(x0, P0, p0))

    @classmethod
    def bearings_only(cls, sensors: Any, r: float, q: float, x0: Any, P0: Any = None,
                      p0: float | None = None, dt: float = 1.0) -> "ParticleFilter":
        """Sensors at ``sensors`` [S, 2] measure the bearing ``atan2(py - s_y, px - s_x)``
        (radians, variance ``r``; the innovation wrapped to (-pi, pi])."""
        keys = {"dt": _toml_value(_number(dt, "dt")), "q": _toml_value(_number(q, "q")),
                "sensors": _toml_value(matrix(sensors, "sensors")),
                "r": _toml_value(_number(r, "r"))}
        return cls._kind("bearings-only", keys, _prior_toml(x0, P0, p0))

    @classmethod
    def range_bearing(cls, r_range: float, r_bearing: float, q: float, x0: Any,
                      P0: Any = None, p0: float | None = None, radar: Any = (0.0, 0.0),
                      dt: float = 1.0) -> "ParticleFilter":
        """A radar at ``radar`` measures ``[range, bearing]`` with variances
        ``r_range``, ``r_bearing``."""
        keys = {"dt": _toml_value(_number(dt, "dt")), "q": _toml_value(_number(q, "q")),
                "radar": _toml_value(vector(radar, "radar")),
                "r_range": _toml_value(_number(r_range, "r_range")),
                "r_bearing": _toml_value(_number(r_bearing, "r_bearing"))}
        return cls._kind("range-bearing", keys, _prior_toml(x0, P0, p0))

    @classmethod
    def stochastic_volatility(cls, mu: float, phi: float, sigma: float) -> "ParticleFilter":
        """``x_0 ~ N(mu, sigma^2 / (1 - phi^2))``, ``x_k = mu + phi (x_{k-1} - mu) +
        sigma v_k``, ``z_k ~ N(0, exp(x_k))`` (Kim, Shephard & Chib 1998)."""
        keys = {"mu": _toml_value(_number(mu, "mu")), "phi": _toml_value(_number(phi, "phi")),
                "sigma": _toml_value(_number(sigma, "sigma"))}
        return cls._kind("stochastic-volatility", keys, "")

    # -- properties --------------------------------------------------------------------

    @property
    def model(self) -> "_kestrel.PfModel":
        return self._model

    kind = property(lambda self: self._model.kind, doc="The model file's kind.")
    nx = property(lambda self: self._model.nx, doc="State dimension.")
    ny = property(lambda self: self._model.ny, doc="Measurement dimension.")

    def to_toml(self) -> str:
        """The TOML text of the model."""
        return self._model.to_toml()

    def __repr__(self) -> str:
        return f"ParticleFilter(kind={self.kind!r}, nx={self.nx}, ny={self.ny})"

    def __reduce__(self):
        return (ParticleFilter, (self._model,))

    # -- the filter --------------------------------------------------------------------

    def filter(self, z: Any, particles: int, resample: str = "systematic", ess: float = 0.5,
               seed: int = 0, device: str = "auto", precision: Any = None,
               keep_particles: bool = False, progress: bool = False,
               first_track: int = 0) -> PfResult:
        """The bootstrap particle filter over every track of ``z`` [B, T, ny] (or one
        track [T, ny]; NaN = missing), as ``kestrel pf``.

        ``particles``: N per track. ``resample``: systematic, stratified, multinomial,
        residual, metropolis[:B], rejection, systematic:grid, stratified:grid or
        subsets[:S]. ``ess``: resample when the effective
        sample size falls below ``ess N`` (1: every step, 0: never). ``seed``: the
        counter-based generator's seed. ``device``: auto, cpu, cuda or cuda:N.
        ``precision``: "f32" or "f64" (default: the input's float dtype; else f64 on
        the CPU and f32 on a GPU). ``keep_particles``: also return the last step's
        particles and weights. ``progress``: a bar on stderr (on a GPU it moves once,
        at the end). ``first_track``: the index of ``z``'s first track in a larger batch:
        each track's random streams are keyed by its index, so chunks of a batch filtered
        apart, each with its first track's index, give exactly the whole batch's result
        (``kestrel.dask.particle_filter`` runs its chunks so).
        """
        if isinstance(particles, bool) or not isinstance(particles, numbers.Integral):
            raise TypeError(f"particles: expected a whole number, got {type(particles).__name__}")
        if particles < 1:
            raise ValueError(f"particles must be at least 1 (got {int(particles)})")
        if not isinstance(resample, str):
            raise TypeError(f"resample: expected a string, got {type(resample).__name__}")
        ess = _number(ess, "ess")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed: expected a whole number, got {type(seed).__name__}")
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed: must be from 0 to 2^64 - 1 (got {int(seed)})")
        if not isinstance(device, str):
            raise TypeError(f"device: expected a string, got {type(device).__name__}")
        if isinstance(first_track, bool) or not isinstance(first_track, numbers.Integral):
            raise TypeError(
                f"first_track: expected a whole number, got {type(first_track).__name__}")
        if first_track < 0:
            raise ValueError(f"first_track: must be at least 0 (got {int(first_track)})")
        a, one, origin = measurements(z, self.ny, precision, device)
        out = _kestrel.particle_filter(
            self._model, a, int(particles), resample=resample, ess=ess, seed=int(seed),
            device=device, keep_particles=bool(keep_particles), progress=bool(progress),
            first_track=int(first_track),
        )
        flush_warnings()
        res = {}
        for key in ("mean", "cov", "loglik", "ess", "particles", "weights"):
            v = out[key]
            if v is not None and one:
                v = v[0]
            res[key] = origin.wrap(v)
        return PfResult(device=out["device"], **res)

    def simulate(self, tracks: int, steps: int, seed: int = 0,
                 missing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Truth [B, T, nx] and measurements [B, T, ny] drawn from the model (float64;
        a missing step, with probability ``missing``, is all NaN): for the nonlinear
        kinds, the numbers of ``kestrel simulate --model``. Track b's truth is drawn
        from its own Philox streams, so it does not depend on the number of tracks."""
        for name, v in (("tracks", tracks), ("steps", steps), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{name}: expected a whole number, got {type(v).__name__}")
            if v < 0:
                raise ValueError(f"{name}: must be >= 0 (got {int(v)})")
        x, z = _kestrel.pf_simulate(self._model, int(tracks), int(steps), seed=int(seed),
                                    missing=_number(missing, "missing"))
        flush_warnings()
        return x, z

