"""Reference per-step log-likelihoods from statsmodels for kestrel's likelihood tests.

Writes crates/kestrel/tests/data/likelihood/{ar10_sunspots,local_level_nile}.{toml,csv}:
a model file and a CSV `t,z,loglik` of statsmodels' `loglikeobs` (missing values are
empty fields; their log-likelihood is 0). Needs numpy and statsmodels:

    python3 -m venv venv && venv/bin/pip install statsmodels
    venv/bin/python scripts/likelihood_reference.py
"""
import os
import numpy as np
import statsmodels.api as sm

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "kestrel", "tests", "data", "likelihood")


def write(name, model_toml, z, ll):
    with open(os.path.join(OUT, name + ".toml"), "w") as f:
        f.write(model_toml)
    with open(os.path.join(OUT, name + ".csv"), "w") as f:
        f.write("t,z,loglik\n")
        for t, (zi, li) in enumerate(zip(z, ll)):
            f.write(f"{t},{'' if np.isnan(zi) else repr(float(zi))},{float(li)!r}\n")


def floats(v):
    return "[" + ", ".join(repr(float(x)) for x in v) + "]"


# AR(10) with measurement error fitted to the (demeaned) sunspot series, stationary prior.
y = sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(dtype=float)
y = y - y.mean()
mod = sm.tsa.SARIMAX(y, order=(10, 0, 0), trend="n", measurement_error=True)
res = mod.fit(disp=False, maxiter=200)
phi = res.params[:10]
r = res.params[10]
q = res.params[11]
assert mod.param_names[10] == "var.measurement_error" and mod.param_names[11] == "sigma2"
z = y.copy()
z[[7, 50, 51, 52, 200]] = np.nan  # a few missing values, one run of three
mod_missing = sm.tsa.SARIMAX(z, order=(10, 0, 0), trend="n", measurement_error=True)
ll = mod_missing.loglikeobs(res.params)
toml = (
    "# AR(10) plus measurement noise fitted by statsmodels to the demeaned sunspot series.\n"
    "[model]\nkind = \"ar\"\n"
    f"coeffs = {floats(phi)}\nq = {float(q)!r}\nr = {float(r)!r}\nprior = \"stationary\"\n"
)
write("ar10_sunspots", toml, z, ll)

# Local level on the Nile series with a known prior.
nile = sm.datasets.nile.load_pandas().data["volume"].to_numpy(dtype=float)
ll_mod = sm.tsa.UnobservedComponents(nile, level="llevel")
fit = ll_mod.fit(disp=False)
s_irr, s_lvl = fit.params
z = nile.copy()
z[[3, 40, 41, 99]] = np.nan
m2 = sm.tsa.UnobservedComponents(z, level="llevel")
m2.ssm.initialize_known(np.array([1000.0]), np.array([[1e4]]))
m2.loglikelihood_burn = 0
ll = m2.loglikeobs(np.array([s_irr, s_lvl]))
toml = (
    "# Local level fitted by statsmodels to the Nile series, with a known prior.\n"
    f"[model]\nF = [[1.0]]\nQ = [[{float(s_lvl)!r}]]\nH = [[1.0]]\nR = [[{float(s_irr)!r}]]\n"
    "[prior]\nx0 = [1000.0]\nP0 = [[10000.0]]\n"
)
write("local_level_nile", toml, z, ll)
print("ar10: phi", phi, "q", q, "r", r, "total", np.nansum(mod_missing.loglikeobs(res.params)))
print("nile: irregular", s_irr, "level", s_lvl, "total", ll.sum())
