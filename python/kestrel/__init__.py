"""kestrel: Bayesian state estimation at scale on CPUs and NVIDIA GPUs.

Families:

- the batched Kalman filter and smoothers, sequential and parallel in time (Sarkka &
  Garcia-Fernandez): :class:`KalmanFilter`; per-step likelihoods :func:`loglik`;
  simulation :func:`simulate`; the per-step API of a streaming tracker :class:`BatchState`;
- nonlinear Gaussian filters and smoothers (EKF, IEKF, UKF, CKF, iterated smoothers) and
  the IMM: :class:`NonlinearFilter` (models as Python functions:
  :meth:`NonlinearFilter.from_functions`);
- the bootstrap particle filter: :class:`ParticleFilter`;
- hidden Markov models (forward-backward, Viterbi, parallel in time):
  :class:`HiddenMarkovModel`;
- track-before-detect (Mazurek): :func:`tbd`, :func:`simulate_frames`;
- multi-target tracking (GNN, JPDA) and its metrics: :func:`track`, :func:`gospa`,
  :func:`ospa`, :func:`clear_mot`, :func:`evaluate`, :func:`simulate_scenario`;
- scale-out on Dask: ``kestrel.dask``.

Arrays in are NumPy arrays, array-likes or DLPack objects (PyTorch, CuPy, JAX); arrays out
are NumPy arrays, or arrays of the input's library on its GPU. NaN marks a missing
measurement. The GIL is released while kestrel computes.
"""

from . import _kestrel
from ._arrays import KestrelWarning
from ._kestrel import Model, ModelError, TimeVaryingModel, __version__
from .hmm import CategoricalEmission, GaussianEmission, HiddenMarkovModel, HmmResult
from .kalman import KalmanFilter, KalmanResult, retrodict
from .likelihood import LogLikResult, loglik
from .nonlinear import FunctionNonlinearFilter, NonlinearFilter, NonlinearResult
from .sim import Simulation, simulate
from .stream import BatchState, Score
from .tracking import (
    GospaResult,
    MotResult,
    OspaResult,
    ScenarioResult,
    TrackResult,
    clear_mot,
    evaluate,
    gospa,
    ospa,
    simulate_scenario,
    track,
)
from .particle import ParticleFilter, PfResult
from .tbd import SimulatedFrames, TbdResult, simulate_frames, tbd


def auto_device() -> str:
    """The device ``device="auto"`` prefers: ``"cuda:0"`` when a GPU is usable, else
    ``"cpu"``."""
    return _kestrel.auto_device()[0]


def cuda_device_count() -> int:
    """The number of usable CUDA GPUs (0 without a GPU or driver)."""
    return _kestrel.cuda_device_count()


__all__ = [
    "CategoricalEmission",
    "GaussianEmission",
    "HiddenMarkovModel",
    "HmmResult",
    "BatchState",
    "LogLikResult",
    "NonlinearFilter",
    "FunctionNonlinearFilter",
    "NonlinearResult",
    "Score",
    "Simulation",
    "loglik",
    "simulate",
    "GospaResult",
    "MotResult",
    "OspaResult",
    "ScenarioResult",
    "TrackResult",
    "clear_mot",
    "evaluate",
    "gospa",
    "ospa",
    "simulate_scenario",
    "track",
    "KalmanFilter",
    "KalmanResult",
    "KestrelWarning",
    "Model",
    "ModelError",
    "TimeVaryingModel",
    "retrodict",
    "ParticleFilter",
    "PfResult",
    "SimulatedFrames",
    "TbdResult",
    "simulate_frames",
    "tbd",
    "auto_device",
    "cuda_device_count",
    "__version__",
]
