"""Plain NumPy references: the textbook equations, one step at a time."""

import numpy as np


def kalman_filter(F, H, Q, R, x0, P0, z, u=None, d=None):
    """Filtered means, covariances and per-step log-likelihoods of one track z [T, ny]
    (kestrel's time convention: step 0 updates the prior; NaN = missing)."""
    nx, ny = F.shape[0], H.shape[0]
    u = np.zeros(nx) if u is None else u
    d = np.zeros(ny) if d is None else d
    T = z.shape[0]
    m, P = x0.copy(), P0.copy()
    ms, Ps, lls = np.zeros((T, nx)), np.zeros((T, nx, nx)), np.zeros(T)
    for k in range(T):
        if k > 0:
            m = F @ m + u
            P = F @ P @ F.T + Q
        if not np.any(np.isnan(z[k])):
            v = z[k] - H @ m - d
            S = H @ P @ H.T + R
            K = np.linalg.solve(S, H @ P).T
            m = m + K @ v
            P = P - K @ S @ K.T
            P = 0.5 * (P + P.T)
            _, logdet = np.linalg.slogdet(S)
            lls[k] = -0.5 * (v @ np.linalg.solve(S, v) + logdet + ny * np.log(2 * np.pi))
        ms[k], Ps[k] = m, P
    return ms, Ps, lls


def rts_smoother(F, Q, ms, Ps, u=None):
    """Rauch-Tung-Striebel over filtered moments."""
    T, nx = ms.shape
    u = np.zeros(nx) if u is None else u
    sm, sP = ms.copy(), Ps.copy()
    for k in range(T - 2, -1, -1):
        mp = F @ ms[k] + u
        Pp = F @ Ps[k] @ F.T + Q
        G = np.linalg.solve(Pp, F @ Ps[k]).T
        sm[k] = ms[k] + G @ (sm[k + 1] - mp)
        sP[k] = Ps[k] + G @ (sP[k + 1] - Pp) @ G.T
    return sm, sP


def random_model(rng, nx, ny):
    """A random stable model with well-conditioned noises."""
    A = rng.normal(size=(nx, nx))
    F = A / (1.1 * max(1e-9, np.max(np.abs(np.linalg.eigvals(A)))))
    H = rng.normal(size=(ny, nx))
    B = rng.normal(size=(nx, nx))
    Q = 0.1 * B @ B.T + 0.05 * np.eye(nx)
    C = rng.normal(size=(ny, ny))
    R = 0.2 * C @ C.T + 0.3 * np.eye(ny)
    x0 = rng.normal(size=nx)
    D = rng.normal(size=(nx, nx))
    P0 = D @ D.T + np.eye(nx)
    return F, H, Q, R, x0, P0
