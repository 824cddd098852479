"""Track-before-detect from Python: kestrel.tbd and kestrel.simulate_frames against the
command line (`kestrel tbd`, `kestrel simulate-frames`) on the same frames, the
recursion against a NumPy reference, a simulated target found at its truth position,
bad inputs (the command's messages), the caller's arrays untouched, the progress bar,
and the GPU path against the CPU (skipped without a GPU)."""

import re

import numpy as np
import pytest

import kestrel
from conftest import cli, cli_error, require_gpu


def cli_flags(opts):
    out = []
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        else:
            out += [flag, v]
    return out


def read_detections(path):
    """`kestrel tbd`'s CSV as (t, x, y) integers and (vx, vy, score) float32."""
    with open(path) as f:
        assert f.readline().strip() == "t,x,y,vx,vy,score"
        rows = [line.strip().split(",") for line in f if line.strip()]
    ints = np.array([[int(r[0]), int(r[1]), int(r[2])] for r in rows], dtype=np.int64)
    reals = np.array([[float(v) for v in r[3:]] for r in rows], dtype=np.float64)
    return ints.reshape(-1, 3), reals.reshape(-1, 3).astype(np.float32)


def frames_case(dtype, t=16, h=24, w=32, seed=1):
    s = kestrel.simulate_frames(t, height=h, width=w, target=["4:5:1:0", "20:18:-1:-1"],
                                snr=9.0, dtype=dtype, seed=seed)
    return s.frames


# Each case: the frames' dtype, and options as keyword arguments (the CLI's flags).
CASES = [
    ("f32", {}),
    ("u8", dict(threshold=70.0, velocities="0:0,1:0,-0.5:0.75,0:-1", nms=1)),
    ("u16", dict(decimation=3, speeds="0,1,1.5", directions=8, pfa=1e-3, alpha=0.5)),
    ("f64", dict(alpha=0.3, noise="rayleigh", pfa=0.01, nms=0)),
    ("f32", dict(decimation=4, velocities="1:0,0:1,1:1", threshold=0.8, alpha=0.25)),
]


@pytest.mark.parametrize("dtype,opts", CASES)
def test_equals_the_cli_on_the_same_frames(tmp_path, dtype, opts):
    frames = frames_case("f32" if dtype == "f64" else dtype)
    if dtype == "f64":
        frames = frames.astype(np.float64) * 1.5 + 0.25
    before = frames.copy()
    inp, det, st = tmp_path / "f.npy", tmp_path / "d.csv", tmp_path / "s.npy"
    np.save(inp, frames)
    cli("tbd", "--input", inp, "--output", det, "--state-out", st, "--device", "cpu",
        *cli_flags(opts))
    ints, reals = read_detections(det)
    r = kestrel.tbd(frames, device="cpu", return_state=True, **opts)
    np.testing.assert_array_equal(frames, before)
    d = r.detections
    assert len(d) == len(ints) > 0
    np.testing.assert_array_equal(np.stack([d["t"], d["x"], d["y"]], 1), ints)
    np.testing.assert_array_equal(np.stack([d["vx"], d["vy"], d["score"]], 1), reals)
    np.testing.assert_array_equal(r.motions[d["motion"]], np.stack([d["vx"], d["vy"]], 1))
    state = np.load(st)
    assert r.state.dtype == np.float32 and r.state.shape == state.shape
    np.testing.assert_array_equal(r.state, state)
    assert r.device == "cpu" and r.kernel is None
    if "threshold" in opts:
        assert r.threshold == np.float32(opts["threshold"]) and r.noise is None
    else:
        assert r.noise["kind"] == opts.get("noise", "gaussian")
        assert np.all(d["score"] > r.threshold)


def test_state_out_writes_the_cli_file(tmp_path):
    frames = frames_case("f32", t=5)
    np.save(tmp_path / "f.npy", frames)
    cli("tbd", "--input", tmp_path / "f.npy", "--output", tmp_path / "d.csv",
        "--state-out", tmp_path / "cli.npy", "--threshold", 1, "--device", "cpu")
    r = kestrel.tbd(frames, threshold=1.0, device="cpu", state_out=tmp_path / "py.npy")
    assert r.state is None
    assert (tmp_path / "py.npy").read_bytes() == (tmp_path / "cli.npy").read_bytes()


@pytest.mark.parametrize("dtype", ["f32", "u8", "u16"])
def test_simulate_frames_equals_the_cli(tmp_path, dtype):
    opts = dict(frames=7, height=20, width=30, targets=3, speeds="1,2", directions=4,
                snr=6.5, seed=11, dtype=dtype)
    if dtype == "u16":
        opts["noise"] = "rayleigh"
    flags = cli_flags(opts) + ["--target", "2.5:3:0.5:0.25", "--target", "29:0:1:0"]
    cli("simulate-frames", "--output", tmp_path / "f.npy", "--truth", tmp_path / "t.csv",
        *flags)
    s = kestrel.simulate_frames(opts.pop("frames"), target=["2.5:3:0.5:0.25", (29, 0, 1, 0)],
                                **opts)
    want = np.load(tmp_path / "f.npy")
    assert s.frames.dtype == want.dtype and s.frames.shape == (7, 20, 30)
    np.testing.assert_array_equal(s.frames, want)
    truth = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1, ndmin=2)
    got = np.stack([s.truth[k].astype(np.float64) for k in s.truth.dtype.names], 1)
    np.testing.assert_array_equal(got, truth)
    assert len(s.targets) == 5 and np.all(s.targets["amplitude"] == s.amplitude)
    assert s.amplitude == pytest.approx(10 ** (6.5 / 20))
    # The second target leaves the frame after frame 0: one truth row.
    assert np.sum(s.truth["target"] == 1) == 1


def reference(frames, motions, alpha):
    """The recursion for integer vectors in NumPy (float32, the library's order of
    operations: P_k = (1 - alpha) P_{k-1}(p - v) + alpha X_k, outside = 0): the state
    after the last frame, the maps D_k = max_v P_k with the first arg-max, and
    the state after every frame [T, V, H, W]."""
    a = np.float32(alpha)
    c = np.float32(1) - a
    t, h, w = frames.shape
    P = np.zeros((len(motions), h, w), np.float32)
    maps, args, states = [], [], []
    for k in range(t):
        X = frames[k].astype(np.float32)
        for i, (vx, vy) in enumerate(np.asarray(motions, dtype=int)):
            S = np.zeros((h, w), np.float32)
            ys, xs = slice(max(vy, 0), h + min(vy, 0)), slice(max(vx, 0), w + min(vx, 0))
            yd = slice(max(-vy, 0), h + min(-vy, 0))
            xd = slice(max(-vx, 0), w + min(-vx, 0))
            S[ys, xs] = P[i][yd, xd]
            P[i] = c * S + a * X
        maps.append(P.max(0))
        args.append(P.argmax(0))
        states.append(P.copy())
    return P, np.array(maps), np.array(args), np.array(states)


def nms_reference(score, thr, r):
    """Pixels over thr that are the largest in their window (ties: the first in raster
    order), in raster order."""
    h, w = score.shape
    out = []
    for y, x in zip(*np.nonzero(score > thr)):
        win = score[max(y - r, 0):y + r + 1, max(x - r, 0):x + r + 1]
        v = score[y, x]
        if win.max() > v:
            continue
        ys, xs = np.nonzero(win == v)
        first = (ys[0] + max(y - r, 0), xs[0] + max(x - r, 0))
        if first == (y, x):
            out.append((y, x))
    return out


def test_against_a_numpy_reference(rng):
    frames = rng.normal(size=(9, 13, 17)).astype(np.float32)
    motions = [(0, 0), (1, 0), (0, 1), (-1, 0), (2, -1)]
    vel = ",".join(f"{vx}:{vy}" for vx, vy in motions)
    r = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, nms=1,
                    device="cpu", return_state=True, return_maps=True)
    P, maps, args, states = reference(frames, motions, 0.2)
    np.testing.assert_allclose(r.state, P, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(r.map_t, np.arange(9))
    np.testing.assert_allclose(r.map_score, maps, rtol=1e-6, atol=1e-7)
    assert r.map_arg.dtype == np.uint16
    # Arg-max where the best vector leads clearly (rounding cannot swap them there).
    top2 = np.sort(states, axis=1)
    clear = (top2[:, -1] - top2[:, -2]) > 1e-5
    np.testing.assert_array_equal(r.map_arg[clear], args[clear])
    # The detections: the maps thresholded and suppressed, frame by frame.
    want = [(t, x, y) for t in range(9) for y, x in nms_reference(r.map_score[t], 0.3, 1)]
    d = r.detections
    assert list(zip(d["t"], d["x"], d["y"])) == want
    np.testing.assert_array_equal(d["score"], r.map_score[d["t"], d["y"], d["x"]])
    np.testing.assert_array_equal(d["motion"], r.map_arg[d["t"], d["y"], d["x"]])
    # Decimation: integer vectors give the plain recursion's maps after frames 2, 5, 8.
    rd = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, decimation=3,
                     device="cpu", return_maps=True)
    np.testing.assert_array_equal(rd.map_t, [2, 5, 8])
    np.testing.assert_allclose(rd.map_score, maps[[2, 5, 8]], rtol=1e-6, atol=1e-7)


def test_a_bright_target_is_found_at_its_truth_position():
    s = kestrel.simulate_frames(40, height=48, width=64, target="10:30:1:-0.5", snr=12.0,
                                seed=5)
    r = kestrel.tbd(s.frames, velocities="0:0,1:0,1:-0.5,0:1,-1:0", device="cpu")
    d = r.detections
    found = 0
    for row in s.truth[s.truth["t"] >= 8]:
        t, x, y = int(row["t"]), row["x"], row["y"]
        near = d[(d["t"] == t) & (np.abs(d["x"] - x) <= 1) & (np.abs(d["y"] - y) <= 1)]
        if len(near):
            found += 1
            best = near[np.argmax(near["score"])]
            assert (best["vx"], best["vy"]) == (1.0, -0.5), best
    assert found == np.sum(s.truth["t"] >= 8)
    # At Pfa 1e-4 per pixel: a handful of false alarms at most over 40 x 3072 pixels.
    off = d[d["t"] >= 8]
    assert len(off) - found < 40
    # The same target, 12 dB below: not found as reliably, and never more than above.
    weak = kestrel.simulate_frames(40, height=48, width=64, target="10:30:1:-0.5",
                                   snr=-6.0, seed=5)
    rw = kestrel.tbd(weak.frames, velocities="0:0,1:0,1:-0.5,0:1,-1:0", device="cpu")
    assert np.max(rw.detections["score"], initial=0) < np.max(d["score"])


def test_inputs_any_array_like_and_dtype(rng):
    f = rng.integers(0, 200, size=(4, 9, 11))
    base = kestrel.tbd(f.astype(np.float64), threshold=50.0, device="cpu",
                       return_state=True)
    for other in [f.tolist(), f.astype(np.int32), f.astype(np.uint8),
                  f.astype(np.uint16), f.astype(np.float32), f.astype(">f4"),
                  np.asfortranarray(f.astype(np.float32))]:
        r = kestrel.tbd(other, threshold=50.0, device="cpu", return_state=True)
        np.testing.assert_array_equal(r.detections, base.detections)
        np.testing.assert_array_equal(r.state, base.state)
    # A strided view is read as its values.
    big = rng.normal(size=(4, 18, 22)).astype(np.float32)
    view = big[:, ::2, ::2]
    r1 = kestrel.tbd(view, threshold=0.5, device="cpu", return_state=True)
    r2 = kestrel.tbd(view.copy(), threshold=0.5, device="cpu", return_state=True)
    np.testing.assert_array_equal(r1.state, r2.state)
    # One frame [H, W] is a sequence of one.
    one = kestrel.tbd(big[0], threshold=0.05, device="cpu", return_state=True)
    np.testing.assert_array_equal(
        one.state, kestrel.tbd(big[:1], threshold=0.05, device="cpu", return_state=True).state)
    # Bool frames read as 0 / 1.
    b = big > 0
    rb = kestrel.tbd(b, threshold=0.05, device="cpu", return_state=True)
    np.testing.assert_array_equal(
        rb.state, kestrel.tbd(b.astype(np.uint8), threshold=0.05, device="cpu",
                              return_state=True).state)
    # Motion sets as numbers.
    ra = kestrel.tbd(big, velocities=[(1, 0), (0, -0.5)], threshold=0.5, device="cpu")
    rs = kestrel.tbd(big, velocities="1:0,0:-0.5", threshold=0.5, device="cpu")
    np.testing.assert_array_equal(ra.detections, rs.detections)
    rp = kestrel.tbd(big, speeds=[0, 1], directions=6, threshold=0.5, device="cpu")
    assert len(rp.motions) == 7
    np.testing.assert_array_equal(
        rp.detections,
        kestrel.tbd(big, speeds="0,1", directions=6, threshold=0.5, device="cpu").detections)


def test_bad_options_give_the_cli_messages(tmp_path):
    frames = frames_case("f32", t=6)
    before = frames.copy()
    inp, out = tmp_path / "f.npy", tmp_path / "never.csv"
    np.save(inp, frames)
    for opts in [dict(pfa=2.0), dict(pfa=0.0), dict(threshold=float("inf")),
                 dict(velocities="1:x"), dict(velocities="1:0,"), dict(speeds="1,a"),
                 dict(speeds="1", directions=0), dict(speeds="0,-1"),
                 dict(kernel="foo"), dict(kernel="fused/ldg/unroll/f32/32x8/D1", decimation=2),
                 dict(state_out=str(tmp_path / "s.csv"))]:
        want = cli_error("tbd", "--input", inp, "--output", out, "--device", "cpu",
                         *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.tbd(frames, device="cpu", **opts)
        assert str(e.value) == want, opts
    # The checks against the frames: the CLI names the file, Python the message alone.
    for opts in [dict(alpha=2.0), dict(alpha=0.0), dict(decimation=0),
                 dict(decimation=2000), dict(velocities="40:0")]:
        want = cli_error("tbd", "--input", inp, "--output", out, "--device", "cpu",
                         *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.tbd(frames, device="cpu", **opts)
        assert want == f"{inp}: {e.value}", opts
    assert not out.exists()
    np.testing.assert_array_equal(frames, before)


def test_bad_frames_give_the_cli_messages(tmp_path):
    inp, out = tmp_path / "f.npy", tmp_path / "never.csv"
    for bad in [np.zeros((2, 3, 4, 5), np.float32), np.zeros(7, np.float32),
                np.zeros((0, 4, 5), np.float32), np.zeros((3, 0, 5), np.float32)]:
        np.save(inp, bad)
        want = cli_error("tbd", "--input", inp, "--output", out, "--device", "cpu")
        with pytest.raises(ValueError) as e:
            kestrel.tbd(bad, device="cpu")
        msg = str(e.value)
        assert msg.startswith("frames: ") and want == f"{inp}: {msg[len('frames: '):]}"
    # A value that is not finite: named by frame and pixel; the array untouched.
    f = np.ones((5, 4, 6), np.float64)
    f[3, 2, 1] = np.nan
    before = f.copy()
    np.save(inp, f)
    want = cli_error("tbd", "--input", inp, "--output", out, "--device", "cpu",
                     "--threshold", 1)
    with pytest.raises(ValueError) as e:
        kestrel.tbd(f, threshold=1.0, device="cpu")
    assert str(e.value) == "frames: frame 3, pixel x 1 y 2: value is not finite"
    assert want == f"{inp}: {str(e.value)[len('frames: '):]}"
    np.testing.assert_array_equal(f, before)
    with pytest.raises(ValueError, match="frames: frame 0, pixel x 0 y 0"):
        kestrel.tbd(np.full((1, 2, 2), np.inf, np.float32), threshold=1.0, device="cpu")
    assert not out.exists()


def test_bad_types_and_combinations():
    f = np.zeros((2, 8, 8), np.float32)
    with pytest.raises(TypeError, match="device"):
        kestrel.tbd(f, device=0)
    with pytest.raises(TypeError, match="frames"):
        kestrel.tbd(np.array([["a"]]))
    with pytest.raises(TypeError, match="frames"):
        kestrel.tbd(np.zeros((1, 2, 2), np.complex64))
    with pytest.raises(TypeError, match="nms"):
        kestrel.tbd(f, nms=1.5)
    with pytest.raises(TypeError, match="decimation"):
        kestrel.tbd(f, decimation=True)
    with pytest.raises(ValueError, match="nms: expected a radius >= 0, got -1"):
        kestrel.tbd(f, nms=-1)
    with pytest.raises(ValueError, match="decimation must be between 1 and 1024, got -3"):
        kestrel.tbd(f, decimation=-3)
    with pytest.raises(ValueError, match="threshold cannot be used with pfa"):
        kestrel.tbd(f, threshold=1.0, pfa=0.1)
    with pytest.raises(ValueError, match="velocities cannot be used with speeds"):
        kestrel.tbd(f, velocities="1:0", speeds="1")
    with pytest.raises(ValueError, match="velocities cannot be used with directions"):
        kestrel.tbd(f, velocities="1:0", directions=4)
    with pytest.raises(ValueError, match="directions requires speeds"):
        kestrel.tbd(f, directions=4)
    with pytest.raises(ValueError, match=r"noise: invalid value 'poisson' \[possible"):
        kestrel.tbd(f, noise="poisson")
    with pytest.raises(ValueError, match=r"velocities: expected vectors \[V, 2\]"):
        kestrel.tbd(f, velocities=[1, 0, 2])
    with pytest.raises(ValueError, match="velocities: no motion vectors"):
        kestrel.tbd(f, velocities=[])
    with pytest.raises(ValueError, match=r"velocities: item 2 \(NaN, 0\): not finite"):
        kestrel.tbd(f, velocities=[(1, 0), (np.nan, 0)])
    with pytest.raises(ValueError, match='unknown device "gpu"'):
        kestrel.tbd(f, device="gpu")


def test_bad_simulation_options_give_the_cli_messages(tmp_path):
    out = tmp_path / "never.npy"
    for args, opts in [((0,), {}), ((3,), dict(height=0)), ((3,), dict(snr=float("nan"))),
                       ((3,), dict(target="1:2:3")), ((3,), dict(target="1:2:x:0")),
                       ((3,), dict(target="1:2:inf:0")),
                       ((3,), dict(targets=2, velocities="1:y")),
                       ((3,), dict(targets=2, speeds="1", directions=0))]:
        want = cli_error("simulate-frames", "--output", out, "--frames", *args,
                         *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.simulate_frames(*args, **opts)
        assert str(e.value) == want, opts
    assert not out.exists()
    # Motion options are read only for random targets, as the command reads them.
    assert kestrel.simulate_frames(2, height=4, width=4, velocities="1:y").frames.shape == (2, 4, 4)
    with pytest.raises(ValueError, match=r"dtype: invalid value 'f16'"):
        kestrel.simulate_frames(2, dtype="f16")
    assert kestrel.simulate_frames(1, height=3, width=3, dtype=np.uint8).frames.dtype == np.uint8
    with pytest.raises(ValueError, match="seed"):
        kestrel.simulate_frames(2, seed=-1)
    with pytest.raises(TypeError, match="frames"):
        kestrel.simulate_frames(2.5)
    with pytest.raises(ValueError, match=r'target "1:2:3": expected X:Y:VX:VY \(four'):
        kestrel.simulate_frames(2, target=[(1, 2, 3)])


def test_progress_bar_only_when_asked(capfd):
    s = kestrel.simulate_frames(12, height=16, width=16, progress=True)
    err = capfd.readouterr().err
    assert "simulate-frames" in err and "12/12 frames" in err
    kestrel.tbd(s.frames, threshold=1.0, device="cpu", progress=True)
    err = capfd.readouterr().err
    assert "tbd" in err and "12/12 frames" in err
    kestrel.tbd(s.frames, threshold=1.0, device="cpu")
    kestrel.simulate_frames(3, height=4, width=4)
    assert capfd.readouterr().err == ""


def test_exports_and_result():
    assert callable(kestrel.tbd) and kestrel.tbd.__module__ == "kestrel.tbd"
    for name in ("tbd", "simulate_frames", "TbdResult", "SimulatedFrames"):
        assert name in kestrel.__all__
    r = kestrel.tbd(np.zeros((3, 5, 5), np.float32), threshold=0.5, device="cpu")
    assert len(r) == 0 and r.detections.dtype.names == (
        "t", "x", "y", "vx", "vy", "score", "motion")
    assert r.state is None and r.map_score is None and len(r.motions) == 13


# The GPU path: the same detections as the CPU (skipped without a GPU). Kernels are
# named: the autotuner's first choice on a fresh machine compiles and times every
# variant (minutes).


@pytest.mark.parametrize("opts", [dict(kernel="fused/ldg/unroll/f32/32x8/D1"),
                                  dict(decimation=4, kernel="fused/ldg/unroll/f32/32x8/D4"),
                                  dict(kernel="lean4v3/ldg/unroll/f32/64x12/K4")])
def test_gpu_equals_the_cpu(opts):
    require_gpu()
    frames = frames_case("f32", t=26, h=64, w=96)
    cpu = kestrel.tbd(frames, device="cpu", threshold=0.9, return_state=True, **opts)
    gpu = kestrel.tbd(frames, device="cuda", threshold=0.9, return_state=True, **opts)
    assert gpu.device.startswith("cuda") and gpu.kernel == opts["kernel"]
    np.testing.assert_allclose(gpu.state, cpu.state, rtol=1e-5, atol=1e-6)
    # Detections away from the threshold agree exactly in position and vector.
    def firm(d):
        d = d[np.abs(d["score"] - 0.9) > 1e-4]
        return set(zip(d["t"], d["x"], d["y"], d["motion"]))
    assert len(firm(cpu.detections)) > 0
    assert firm(gpu.detections) == firm(cpu.detections)


def test_gpu_f16_state_is_close():
    require_gpu()
    frames = frames_case("f32", t=24, h=64, w=96)
    k = "fused/ldg/unroll/f16/32x8/D1"
    cpu = kestrel.tbd(frames, device="cpu", threshold=0.9, return_state=True)
    half = kestrel.tbd(frames, device="cuda", threshold=0.9, return_state=True,
                       f16_state=True, kernel=k)
    assert half.kernel == k
    np.testing.assert_allclose(half.state, cpu.state, atol=5e-3 * np.abs(frames).max())
    with pytest.raises(ValueError, match="does not fit in f16"):
        kestrel.tbd(np.full((2, 16, 16), 1e5, np.float32), device="cuda", threshold=1.0,
                    f16_state=True, kernel=k)


def switching_reference(frames, motions, M, alpha):
    """P_k(x, v) = (1 - alpha) sum_v' M[v', v] P_{k-1}(x - v, v') + alpha X_k(x), integer
    vectors, outside reads 0, in float64."""
    t, h, w = frames.shape
    V = len(motions)
    P = np.zeros((V, h, w))
    maps = []
    for k in range(t):
        Q = np.einsum("ab,ayx->byx", M, P)
        nxt = np.empty_like(P)
        for v, (vx, vy) in enumerate(motions):
            s = np.zeros((h, w))
            ys, xs = slice(max(vy, 0), h + min(vy, 0)), slice(max(vx, 0), w + min(vx, 0))
            ys0, xs0 = slice(max(-vy, 0), h + min(-vy, 0)), slice(max(-vx, 0), w + min(-vx, 0))
            s[ys, xs] = Q[v][ys0, xs0]
            nxt[v] = (1 - alpha) * s + alpha * frames[k]
        P = nxt
        maps.append(P.max(axis=0))
    return P, np.array(maps)


def random_stochastic(rng, v):
    M = rng.uniform(0.01, 1.0, size=(v, v)) * (rng.uniform(size=(v, v)) > 0.3)
    M[np.arange(v), rng.integers(0, v, size=v)] += 0.5
    return M / M.sum(axis=1, keepdims=True)


def test_switching_against_a_numpy_reference(rng):
    frames = rng.normal(size=(8, 13, 17)).astype(np.float32)
    motions = [(0, 0), (1, 0), (0, 1), (-1, 0), (2, -1)]
    vel = ",".join(f"{vx}:{vy}" for vx, vy in motions)
    M = random_stochastic(rng, len(motions))
    keep = M.copy()
    r = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, device="cpu",
                    transition=M, return_state=True, return_maps=True)
    np.testing.assert_array_equal(M, keep)
    P, maps = switching_reference(frames.astype(np.float64), motions, M, 0.2)
    np.testing.assert_allclose(r.state, P, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.map_score, maps, rtol=1e-5, atol=1e-6)
    # The identity (and switch=0) is the plain recursion, bit for bit.
    plain = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, device="cpu",
                        return_state=True, return_maps=True)
    for kw in (dict(transition=np.eye(5)), dict(switch=0.0)):
        same = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, device="cpu",
                           return_state=True, return_maps=True, **kw)
        np.testing.assert_array_equal(same.state, plain.state)
        np.testing.assert_array_equal(same.map_score, plain.map_score)
    # Decimation: the every-frame maps at the block ends.
    rd = kestrel.tbd(frames, velocities=vel, alpha=0.2, threshold=0.3, decimation=3,
                     device="cpu", transition=M, return_maps=True)
    np.testing.assert_array_equal(rd.map_t, [2, 5, 7])
    np.testing.assert_array_equal(rd.map_score, r.map_score[[2, 5, 7]])


def test_switching_equals_the_cli(tmp_path):
    frames = frames_case("f32")
    np.save(tmp_path / "f.npy", frames)
    M = np.full((13, 13), 0.05)
    np.fill_diagonal(M, 0.4)
    np.save(tmp_path / "m.npy", M)
    for kw, flags in ((dict(switch=0.25), ["--switch", "0.25"]),
                      (dict(transition=M), ["--transition", tmp_path / "m.npy"]),
                      (dict(transition=tmp_path / "m.npy"), ["--transition", tmp_path / "m.npy"])):
        cli("tbd", "--input", tmp_path / "f.npy", "--output", tmp_path / "d.csv",
            "--device", "cpu", "--state-out", tmp_path / "s.npy", *flags)
        r = kestrel.tbd(frames, device="cpu", return_state=True, **kw)
        np.testing.assert_array_equal(r.state, np.load(tmp_path / "s.npy"))
        ints, reals = read_detections(tmp_path / "d.csv")
        d = r.detections
        np.testing.assert_array_equal(np.stack([d["t"], d["x"], d["y"]], axis=1), ints)
        assert r.threshold > 0


def test_bad_switching_options_give_the_cli_messages(tmp_path):
    frames = frames_case("f32", t=3)
    np.save(tmp_path / "f.npy", frames)
    base = ["tbd", "--input", tmp_path / "f.npy", "--output", tmp_path / "d.csv",
            "--threshold", "1"]
    bad_rows = np.eye(13)
    bad_rows[3, 3] = 0.5
    neg = np.eye(13)
    neg[2, 2], neg[2, 5] = 1.5, -0.5
    for name, M, needle in (("rows", bad_rows, "row 3 sums to 0.5"),
                            ("neg", neg, "row 2, column 5"),
                            ("shape", np.eye(4), "shape [4, 4]")):
        np.save(tmp_path / f"{name}.npy", M)
        msg = cli_error(*base, "--transition", tmp_path / f"{name}.npy")
        assert needle in msg
        with pytest.raises(ValueError) as e:
            kestrel.tbd(frames, threshold=1.0, transition=tmp_path / f"{name}.npy")
        assert str(e.value) == msg
        with pytest.raises(ValueError, match=re.escape(needle)):
            kestrel.tbd(frames, threshold=1.0, transition=M)
    msg = cli_error(*base, "--switch", "1.5")
    with pytest.raises(ValueError) as e:
        kestrel.tbd(frames, threshold=1.0, switch=1.5)
    assert str(e.value) == msg
    with pytest.raises(ValueError, match="transition cannot be used with switch"):
        kestrel.tbd(frames, threshold=1.0, switch=0.1, transition=np.eye(13))
    with pytest.raises(TypeError, match="transition"):
        kestrel.tbd(frames, threshold=1.0, transition=object())


def test_gpu_switching_equals_the_cpu():
    require_gpu()
    frames = frames_case("f32", t=12, h=64, w=96)
    for kw in (dict(switch=0.2), dict(switch=0.3, decimation=4)):
        cpu = kestrel.tbd(frames, device="cpu", threshold=0.9, return_state=True, **kw)
        gpu = kestrel.tbd(frames, device="cuda", threshold=0.9, return_state=True, **kw)
        assert gpu.device.startswith("cuda")
        np.testing.assert_allclose(gpu.state, cpu.state, rtol=1e-5, atol=1e-6)


def test_unaligned_frames_are_read_as_aligned_ones():
    # A buffer from a pickle or the network: contiguous, at an odd address.
    sim = kestrel.simulate_frames(6, height=20, width=24, target="10:10:1:0", snr=5, seed=2)
    raw = bytearray(sim.frames.nbytes + 1)
    a = np.frombuffer(raw, dtype=np.float32, offset=1, count=sim.frames.size).reshape(
        sim.frames.shape)
    a[...] = sim.frames
    assert not a.flags.aligned
    got = kestrel.tbd(a, threshold=0.3, device="cpu")
    np.testing.assert_array_equal(got.detections,
                                  kestrel.tbd(sim.frames, threshold=0.3, device="cpu").detections)
