"""The per-step API for streaming trackers: a batch of Kalman filters in stable slots,
advanced one call at a time, with room for gating and association between the
prediction and the update.

On the CPU it is the library's ``kalman::BatchState`` (the batch filter's own
arithmetic: SIMD lanes of 8 targets for the common tracking sizes, the textbook step
otherwise); with ``device="cuda"`` it is ``kalman::cuda::BatchTracker``, whose state
stays on the GPU (each call uploads only its inputs; reading ``mean`` / ``cov`` copies
the state back).

The equations are the Kalman filter's (Kalman 1960; the update in Joseph-free
symmetric form through the Cholesky factor of ``S``):

    predict:  x <- F x + u + c,     P <- F P F^T + Q
    update:   S = H P H^T + R,  K = P H^T S^-1,  x <- x + K (z - H x - d),
              P <- P - K S K^T,  loglik = log N(z; H x + d, S)

A target's state is "now": a prior given to :meth:`BatchState.add` is the state at the
time of the next update. With kestrel's time convention (step 0 updates the prior, each
later step is predict-then-update), ``update`` at step 0 then ``predict`` + ``update``
per step reproduces :meth:`KalmanFilter.filter` bit for bit on the CPU.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _kestrel
from ._arrays import as_float, flush_warnings, precision_dtype, to_numpy, whole
from .likelihood import model_of


@dataclass
class Score:
    """The fit of candidate measurements to each target's predicted measurement:
    ``mahalanobis2`` (``y^T S^-1 y``, chi-square with ny degrees of freedom for the
    right target) and ``loglik`` (``log N(z; H x + d, S)``), NaN for free slots."""

    mahalanobis2: np.ndarray
    loglik: np.ndarray


class BatchState:
    """Up to ``capacity`` targets of one linear-Gaussian model, each in its own slot,
    filtered one call at a time (FilterPy's ``predict`` / ``update`` over a batch).

    ``model``: a :class:`KalmanFilter`, a ``kestrel.Model`` or a model file path.
    ``device``: ``"cpu"`` (default) or ``"cuda"`` / ``"cuda:N"`` (the state resident on
    that GPU). ``precision``: "f64" / "f32" (default f64 on the CPU, f32 on a GPU).
    ``kinematics``: how ``F`` and ``Q`` depend on a sampling interval, for
    ``predict(dt=...)``: ``"auto"`` (recognised when the model is a constant-velocity or
    constant-acceleration model of the builders, any dt and q), None, or
    ``("cv" | "ca", q)`` with the white-noise intensity ``q``.

    >>> import numpy as np, kestrel
    >>> kf = kestrel.KalmanFilter.from_toml("examples/cv2d-builder.toml")
    >>> st = kestrel.BatchState(kf, capacity=4)
    >>> a = st.add([0.0, 1.0, 0.0, 0.0])          # mean; the model's prior covariance
    >>> st.update(np.array([[0.5, 0.1], [np.nan] * 2, [np.nan] * 2, [np.nan] * 2]))
    >>> st.predict(dt=0.5)
    >>> st.x.shape, st.P.shape
    ((4, 4), (4, 4, 4))
    """

    def __init__(self, model: Any, capacity: int, *, device: str = "cpu",
                 precision: Any = None, kinematics: Any = "auto"):
        m = model_of(model)
        capacity = whole(capacity, "capacity")
        if not isinstance(device, str):
            raise TypeError(f"device: expected a string, got {type(device).__name__}")
        dtype = precision_dtype(precision, None, device)
        if kinematics is None:
            kin: Any = "none"
        elif isinstance(kinematics, str):
            kin = kinematics
        elif isinstance(kinematics, (tuple, list)) and len(kinematics) == 2:
            kind, q = kinematics
            if isinstance(q, bool) or not isinstance(q, (numbers.Real, np.floating)):
                raise TypeError(f"kinematics: q must be a number, got {type(q).__name__}")
            kin = (str(kind), float(q))
        else:
            raise TypeError(
                'kinematics: expected "auto", None, or a pair ("cv" | "ca", q), '
                f"got {type(kinematics).__name__}"
            )
        self._s = _kestrel.BatchState(m, capacity, device=device,
                                      double=dtype == np.float64, kinematics=kin)
        self._dtype = dtype
        flush_warnings()

    # ----------------------------------------------------------------- sizes
    nx = property(lambda self: self._s.nx, doc="State dimension.")
    ny = property(lambda self: self._s.ny, doc="Measurement dimension.")
    capacity = property(lambda self: self._s.capacity, doc="Number of slots.")
    device = property(lambda self: self._s.device, doc="Where the state lives.")
    dtype = property(lambda self: self._dtype, doc="The state's float dtype.")
    updates = property(lambda self: self._s.updates, doc="Updates run so far.")

    @property
    def kinematics(self) -> tuple[str, int, float] | None:
        """``(kind, dims, q)`` of the kinematics that ``predict(dt=...)`` uses, or None."""
        return self._s.kinematics

    @property
    def live(self) -> np.ndarray:
        """Which slots hold a target, [capacity] booleans."""
        return self._s.live

    @property
    def slots(self) -> np.ndarray:
        """The slots that hold a target, in increasing order."""
        return np.flatnonzero(self._s.live)

    def __len__(self) -> int:
        return int(np.count_nonzero(self._s.live))

    def __repr__(self) -> str:
        return (f"BatchState(nx={self.nx}, ny={self.ny}, capacity={self.capacity}, "
                f"targets={len(self)}, device={self.device}, dtype={self._dtype})")

    # ---------------------------------------------------------------- arrays
    def _arr(self, x: Any, name: str, shape: tuple[int, ...], dtype: Any = None) -> np.ndarray:
        a, _ = to_numpy(x, name)
        a = as_float(a, name, self._dtype if dtype is None else dtype)
        if a.shape != shape:
            want = "[" + ", ".join(str(s) for s in shape) + "]"
            raise ValueError(f"{name}: expected shape {want}, got {list(a.shape)}")
        return a

    def _rows(self, x: Any, name: str, per: tuple[int, ...]) -> np.ndarray:
        """One value of shape ``per`` for every slot: [capacity, *per], or one ``per``
        broadcast to every slot."""
        a, _ = to_numpy(x, name)
        a = as_float(a, name, self._dtype)
        cap = self.capacity
        if a.shape == per:
            return np.ascontiguousarray(np.broadcast_to(a, (cap, *per)))
        if a.shape != (cap, *per):
            want = ", ".join(str(s) for s in (cap, *per))
            raise ValueError(f"{name}: expected shape [{want}] (one per slot), got {list(a.shape)}")
        return a

    def _mask(self, mask: Any) -> np.ndarray | None:
        if mask is None:
            return None
        a, _ = to_numpy(mask, "mask")
        if a.dtype != np.bool_:
            if a.dtype.kind not in "biu":
                raise TypeError(f"mask: expected booleans, got dtype {a.dtype}")
            a = a != 0
        if a.shape != (self.capacity,):
            raise ValueError(f"mask: expected shape [{self.capacity}] (one per slot), got {list(a.shape)}")
        return np.ascontiguousarray(a)

    # ------------------------------------------------------- adding, removing
    def add(self, x0: Any = None, P0: Any = None, *, count: int | None = None) -> Any:
        """Adds targets; returns the slot of each (the lowest free ones, kept until
        :meth:`remove`).

        ``add()``: one target with the prior (the model's, or :meth:`set_prior`'s).
        ``add(x0)``: one with its own mean [nx] and the prior's covariance (a track
        started from one detection); ``add(x0, P0)``: its own prior. With ``x0`` [n, nx]
        (and ``P0`` [n, nx, nx]) or ``count=n``: n targets at once, all or none; returns
        their slots as an array.
        """
        nx = self.nx
        if count is not None:
            count = whole(count, "count")
            if x0 is not None or P0 is not None:
                raise ValueError("count applies to adds with the prior only (no x0, P0)")
            return np.asarray(self._s.add_many(count), dtype=np.int64)
        if x0 is None:
            if P0 is not None:
                raise ValueError("P0: a prior covariance needs its mean x0")
            return self._s.add()
        a, _ = to_numpy(x0, "x0")
        a = as_float(a, "x0", self._dtype)
        if a.ndim == 2:
            n = a.shape[0]
            xs = self._arr(a, "x0", (n, nx))
            ps = None if P0 is None else self._arr(P0, "P0", (n, nx, nx))
            slots = self._s.add_many(n, x0=xs, p0=ps)
            return np.asarray(slots, dtype=np.int64)
        x = self._arr(a, "x0", (nx,))
        p = None if P0 is None else self._arr(P0, "P0", (nx, nx))
        return self._s.add(x0=x, p0=p)

    def remove(self, slots: int | Sequence[int] | np.ndarray) -> None:
        """Stops tracking the targets in ``slots`` (one slot or several; all or none)."""
        if isinstance(slots, (numbers.Integral,)) and not isinstance(slots, bool):
            lst = [int(slots)]
        else:
            arr = np.asarray(slots)
            if arr.dtype.kind not in "iu":
                raise TypeError(f"slots: expected whole numbers, got dtype {arr.dtype}")
            lst = [int(s) for s in arr.reshape(-1)]
        if any(s < 0 for s in lst):
            raise ValueError(f"slot {min(lst)} holds no target")
        self._s.remove(lst)

    def set_prior(self, x0: Any, P0: Any) -> None:
        """Sets the prior that :meth:`add` gives new targets (mean [nx], covariance
        [nx, nx], positive semi-definite)."""
        nx = self.nx
        self._s.set_prior(self._arr(x0, "x0", (nx,)), self._arr(P0, "P0", (nx, nx)))

    def set_state(self, slot: int, x: Any, P: Any) -> None:
        """Replaces the state of the target in ``slot`` (re-initialisation; CPU)."""
        nx = self.nx
        self._s.set_state(whole(slot, "slot"), self._arr(x, "x", (nx,)),
                          self._arr(P, "P", (nx, nx)))

    def reserve(self, capacity: int) -> None:
        """Grows the batch to ``capacity`` slots; targets keep their slots (CPU)."""
        self._s.reserve(whole(capacity, "capacity"))

    # ------------------------------------------------------ predict, update
    def predict(self, dt: Any = None, u: Any = None) -> None:
        """Moves every target forward: one step of the model (``dt`` None), the interval
        ``dt`` (a number) or one interval per slot (``dt`` [capacity]) with ``F`` and ``Q``
        of the kinematics; ``u``: a control input [capacity, nx] (or [nx] for all),
        added to the model's ``u``."""
        one: float | None = None
        per = None
        if dt is not None:
            if isinstance(dt, bool):
                raise TypeError("dt: expected a number or an array, got bool")
            if isinstance(dt, (numbers.Real, np.floating)):
                one = float(dt)
            else:
                per = self._arr(dt, "dt", (self.capacity,), dtype=np.float64)
        c = None if u is None else self._rows(u, "u", (self.nx,))
        self._s.predict(dt=one, dts=per, control=c)

    def update(self, z: Any, mask: Any = None, R: Any = None) -> None:
        """Updates every target with its row of ``z`` [capacity, ny]: a row with a NaN,
        a False in ``mask`` [capacity] or a free slot leaves the target at its prediction
        (log-likelihood 0). ``R``: the measurement noise, [ny, ny] or one per slot
        [capacity, ny, ny], in place of the model's."""
        zz = self._arr(z, "z", (self.capacity, self.ny))
        r = None if R is None else self._rows(R, "R", (self.ny, self.ny))
        self._s.update(zz, mask=self._mask(mask), r=r)

    # --------------------------------------------------------------- gating
    def measure(self, R: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Every target's predicted measurement ``H x + d`` [capacity, ny] and its
        innovation covariance ``S = H P H^T + R`` [capacity, ny, ny] from its current
        state (free slots NaN)."""
        r = None if R is None else self._rows(R, "R", (self.ny, self.ny))
        return self._s.measure(r=r)

    def score(self, z: Any, R: Any = None) -> Score:
        """How well candidate measurements fit each target: ``z`` [capacity, ny] (one per
        slot) gives [capacity] values, ``z`` [capacity, m, ny] (m candidates per slot)
        [capacity, m]. Computed from the current (predicted) state, as the update
        would see it."""
        a, _ = to_numpy(z, "z")
        a = as_float(a, "z", self._dtype)
        cap, ny = self.capacity, self.ny
        single = a.ndim == 2
        if single:
            a = a[:, None, :]
        if a.ndim != 3 or a.shape[0] != cap or a.shape[2] != ny:
            raise ValueError(
                f"z: expected shape [{cap}, {ny}] or [{cap}, m, {ny}], got {list(np.shape(z))}"
            )
        r = None if R is None else self._rows(R, "R", (ny, ny))
        d2, ll = self._s.score(np.ascontiguousarray(a), r=r)
        if single:
            d2, ll = d2[:, 0], ll[:, 0]
        return Score(mahalanobis2=d2, loglik=ll)

    def gate(self, z: Any, prob: float = 0.99, threshold: float | None = None,
             R: Any = None) -> np.ndarray:
        """Which candidates fall inside each target's validation gate
        ``y^T S^-1 y <= gamma``, with ``gamma`` the ``prob`` quantile of the chi-square
        distribution with ny degrees of freedom (Bar-Shalom & Fortmann), or
        ``threshold``; shapes as :meth:`score` (free slots False)."""
        gamma = threshold if threshold is not None else _kestrel.chi2_quantile(self.ny, float(prob))
        d2 = self.score(z, R=R).mahalanobis2
        with np.errstate(invalid="ignore"):
            return d2 <= gamma

    # --------------------------------------------------------------- reading
    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mean [capacity, nx], cov [capacity, nx, nx], loglik [capacity])`` in one
        read (one copy from the GPU); free slots NaN."""
        return self._s.state()

    @property
    def mean(self) -> np.ndarray:
        """The means, [capacity, nx] (free slots NaN)."""
        return self._s.state()[0]

    @property
    def cov(self) -> np.ndarray:
        """The covariances, [capacity, nx, nx] (free slots NaN)."""
        return self._s.state()[1]

    @property
    def loglik(self) -> np.ndarray:
        """The predictive log-likelihood of each target's last update, [capacity] (0
        where it had no measurement; NaN before its first update)."""
        return self._s.state()[2]

    @property
    def S(self) -> np.ndarray:
        """``S = H P H^T + R`` of the last :meth:`measure` or :meth:`update`,
        [capacity, ny, ny]."""
        return self._s.innovations()[1]

    @property
    def zhat(self) -> np.ndarray:
        """``H x + d`` of the last :meth:`measure` or :meth:`update`, [capacity, ny]."""
        return self._s.innovations()[0]

    # FilterPy's names.
    x = mean
    P = cov
    log_likelihood = loglik
