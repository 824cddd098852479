"""Multi-target tracking from Python: kestrel.track, simulate_scenario and evaluate
against the command line on the same files, GOSPA and OSPA against Stone Soup, a
simulated scenario tracked with low GOSPA, and bad inputs."""

import csv
import datetime
import os

import numpy as np
import pytest

import kestrel
from conftest import REPO, cli, cli_error, require_gpu, ticks_while

MODEL = os.path.join(REPO, "examples", "tracking.toml")


def read_csv(path):
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def numbers(rows, cols):
    return np.array([[float(r[c]) for c in cols] for r in rows]).reshape(len(rows), len(cols))


@pytest.fixture(scope="module")
def scenario_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("scenario")
    det, truth = d / "det.csv", d / "truth.csv"
    cli("simulate", "--scenario", "crossing", "--model", MODEL, "--tracks", 8, "--steps", 25,
        "--pd", 0.9, "--clutter", 8, "--region", 500, "--births", 0.1, "--death", 0.02,
        "--seed", 4, "--output", det, "--truth", truth)
    return d, det, truth


@pytest.fixture(scope="module")
def sim():
    return kestrel.simulate_scenario(MODEL, 8, 25, "crossing", pd=0.9, clutter=8,
                                     region=500, births=0.1, death=0.02, seed=4)


def test_simulate_scenario_equals_the_cli(scenario_files, sim):
    _, det, truth = scenario_files
    head, rows = read_csv(det)
    assert head == ["t", "z0", "z1"]
    d = numbers(rows, range(3))
    np.testing.assert_array_equal(sim.t, d[:, 0])
    np.testing.assert_array_equal(sim.z, d[:, 1:])
    head, rows = read_csv(truth)
    assert head == ["t", "id", "x0", "x1", "x2", "x3"]
    tr = numbers(rows, range(6))
    np.testing.assert_array_equal(sim.truth_t, tr[:, 0])
    np.testing.assert_array_equal(sim.truth_id, tr[:, 1].astype(np.int64))
    np.testing.assert_array_equal(sim.truth_x, tr[:, 2:])
    assert sim.truth_id.dtype == np.int64 and sim.z.shape[1] == 2
    assert sim.clutter_density == pytest.approx(8 / 1000.0**2)
    scans = sim.scans()
    assert len(scans) == 25 and sum(len(s) for s in scans) == len(sim.t)
    # The same seed gives the same scenario; another seed another.
    again = kestrel.simulate_scenario(MODEL, 8, 25, "crossing", pd=0.9, clutter=8,
                                      region=500, births=0.1, death=0.02, seed=4)
    np.testing.assert_array_equal(again.z, sim.z)
    other = kestrel.simulate_scenario(MODEL, 8, 25, "crossing", pd=0.9, clutter=8,
                                      region=500, births=0.1, death=0.02, seed=5)
    assert other.z.shape != sim.z.shape or not np.array_equal(other.z, sim.z)


def check_same_tracks(res, path, nx=4):
    head, rows = read_csv(path)
    assert head[:3 + nx] == ["t", "track", "status"] + [f"x{i}" for i in range(nx)]
    assert len(res) == len(rows) and len(rows) > 0
    np.testing.assert_array_equal(res.t, [float(r[0]) for r in rows])
    np.testing.assert_array_equal(res.track, [int(r[1]) for r in rows])
    np.testing.assert_array_equal(res.status, [r[2] for r in rows])
    np.testing.assert_array_equal(res.x, numbers(rows, range(3, 3 + nx)))
    P = numbers(rows, range(3 + nx, 3 + nx + nx * nx)).reshape(-1, nx, nx)
    np.testing.assert_array_equal(res.P, P)


CASES = [
    dict(),
    dict(assoc="jpda", pd=0.85, clutter=1e-5, confirm="3/4"),
    dict(assoc="jpda", jpda_marginals="lbp", clutter=1e-5),
    dict(gate=0.99, confirm="2/2", delete=2, delete_tentative=1, max_variance=400.0),
]


def cli_flags(opts):
    out = []
    for k, v in opts.items():
        out.append(f"--{k.replace('_', '-')}={v}")
    return out


def case_id(opts):
    return ",".join(f"{k}={v}" for k, v in opts.items()) or "defaults"


@pytest.mark.parametrize("opts", CASES, ids=case_id)
def test_track_equals_the_cli(scenario_files, sim, opts):
    d, det, _ = scenario_files
    out = d / f"tracks-{abs(hash(str(opts)))}.csv"
    cli("track", "--model", MODEL, "--detections", det, "--output", out, *cli_flags(opts))
    t0, z0 = sim.t.copy(), sim.z.copy()
    res = kestrel.track(sim.z, MODEL, t=sim.t, **opts)
    np.testing.assert_array_equal(sim.t, t0)
    np.testing.assert_array_equal(sim.z, z0)
    check_same_tracks(res, out)
    assert res.device == "cpu" and res.scans == 25
    assert res.confirmed_tracks > 0 and res.x.dtype == np.float64
    # The list-of-scans form is the same run (the scenario has detections at its first
    # and last steps, so both span the same scans).
    by_scan = kestrel.track(sim.scans(), kestrel.KalmanFilter.from_toml(MODEL), **opts)
    for k in ("t", "track", "status", "x", "P"):
        np.testing.assert_array_equal(getattr(by_scan, k), getattr(res, k))
    assert by_scan.clutter == res.clutter


def test_track_in_seconds_and_an_npy_file_equal_the_cli(tmp_path, sim):
    det = tmp_path / "det.npy"
    t = sim.t * 0.5
    np.save(det, np.column_stack([t, sim.z]).astype(np.float32))
    out = tmp_path / "tracks.csv"
    cli("track", "--model", MODEL, "--detections", det, "--output", out, "--dt", 0.5,
        "--clutter", 2e-5)
    z32 = sim.z.astype(np.float32)
    res = kestrel.track(z32, MODEL, t=t.astype(np.float32), dt=0.5, clutter=2e-5)
    check_same_tracks(res, out)
    assert set(np.unique(res.t)) <= set(np.arange(25) * 0.5)
    scans = kestrel.track([s.astype(np.float32) for s in sim.scans()], MODEL, dt=0.5,
                          clutter=2e-5)
    np.testing.assert_array_equal(scans.x, res.x)
    np.testing.assert_array_equal(scans.t, res.t)


def test_trailing_empty_scans_coast_and_delete():
    z = [np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]), np.array([[2.0, 2.0]]), [], [], []]
    res = kestrel.track(z, MODEL, clutter=1e-6, delete=2)
    by = res.by_track()
    assert list(by) == [0]
    t, x = by[0]
    # Confirmed at scan 1, coasts through scan 3, deleted after its second miss (scan 4).
    np.testing.assert_array_equal(t, [1, 2, 3])
    assert res.scans == 6 and res.t.max() == 3


def test_array_kinds_give_the_same_tracks(sim):
    ref = kestrel.track(sim.z, MODEL, t=sim.t, clutter=1e-5)
    zi = np.round(sim.z)
    a = kestrel.track(np.asfortranarray(zi), MODEL, t=sim.t.astype(np.int64), clutter=1e-5)
    b = kestrel.track(zi.tolist(), MODEL, t=list(sim.t), clutter=1e-5)
    c = kestrel.track(zi, MODEL, t=sim.t, clutter=1e-5)
    for r in (a, b):
        np.testing.assert_array_equal(r.x, c.x)
        np.testing.assert_array_equal(r.track, c.track)
    assert not np.array_equal(c.x, ref.x)
    # Scans of equal size as one [T, n, ny] array.
    z3 = np.stack([np.array([[0.0, 0.0], [500.0, 0.0]]) + k for k in range(6)])
    d = kestrel.track(z3, MODEL, clutter=1e-6)
    e = kestrel.track(list(z3), MODEL, clutter=1e-6)
    np.testing.assert_array_equal(d.x, e.x)
    assert set(d.by_track()) == {0, 1} and d.scans == 6


@pytest.mark.parametrize("metric,extra", [
    ("gospa", ["--switching", "3"]),
    ("gospa", ["--p", "1", "--c", "25", "--all-tracks"]),
    ("ospa", ["--p", "3", "--c", "15"]),
    ("mot", ["--c", "20"]),
])
def test_evaluate_equals_the_cli(scenario_files, sim, metric, extra):
    d, det, truth = scenario_files
    tracks = d / "tracks-eval.csv"
    cli("track", "--model", MODEL, "--detections", det, "--output", tracks, "--clutter", 1e-5)
    res = kestrel.track(sim.scans(), MODEL, clutter=1e-5)
    out = d / f"eval-{metric}.csv"
    r = cli("eval", "--truth", truth, "--tracks", tracks, "--metric", metric, "--model", MODEL,
            "--output", out, *extra)
    flags = [f for f in extra if f != "--all-tracks"]
    kw = {f[2:]: float(v) for f, v in zip(flags[::2], flags[1::2])}
    if "--all-tracks" in extra:
        kw["all_tracks"] = True
    e = kestrel.evaluate(sim, res, metric, model=MODEL, **kw)
    head, rows = read_csv(out)
    vals = numbers(rows, range(len(head)))
    for j, name in enumerate(head):
        np.testing.assert_array_equal(np.asarray(getattr(e, name), dtype=float), vals[:, j],
                                      err_msg=name)
    assert e.summary == r.stdout.strip()
    # Tuples of the files' columns are the same input.
    e2 = kestrel.evaluate((sim.truth_t, sim.truth_id, sim.truth_x),
                          (res.t, res.track, res.status, res.x), metric, model=MODEL, **kw)
    assert e2.summary == e.summary


def random_sets(rng, T=12, d=2):
    truth, est = [], []
    for k in range(T):
        m, n = rng.integers(0, 6, size=2)
        if k == 0:
            m, n = 0, 3
        if k == 1:
            m, n = 4, 0
        x = rng.uniform(0, 20, size=(m, d))
        y = rng.uniform(0, 20, size=(n, d))
        truth.append(x)
        est.append(y)
    return truth, est


def stonesoup_states(sets, t0):
    from stonesoup.types.state import State

    out = []
    for k, s in enumerate(sets):
        ts = t0 + datetime.timedelta(seconds=k)
        out.append([State(p.reshape(-1, 1), timestamp=ts) for p in s])
    return out


@pytest.mark.parametrize("p,c", [(2.0, 10.0), (1.0, 5.0), (3.0, 7.5)])
def test_gospa_and_ospa_equal_stone_soup(rng, p, c):
    pytest.importorskip("stonesoup")
    from stonesoup.metricgenerator.ospametric import GOSPAMetric, OSPAMetric

    truth, est = random_sets(rng)
    t0 = datetime.datetime(2024, 1, 1)
    ts, es = stonesoup_states(truth, t0), stonesoup_states(est, t0)
    g = kestrel.gospa(truth, est, c=c, p=p)
    o = kestrel.ospa(truth, est, c=c, p=p)
    ss_g = GOSPAMetric(c=c, p=p)
    ss_o = OSPAMetric(c=c, p=p)
    for k in range(len(truth)):
        if not es[k] and not ts[k]:
            assert g.gospa[k] == 0.0 and o.ospa[k] == 0.0
            continue
        v, _ = ss_g.compute_gospa_metric(es[k], ts[k])
        v = v.value
        assert g.gospa[k] == pytest.approx(v["distance"], rel=1e-12, abs=1e-12)
        assert g.localisation[k] == pytest.approx(v["localisation"], rel=1e-12, abs=1e-12)
        assert g.missed[k] == pytest.approx(v["missed"], rel=1e-12, abs=1e-12)
        assert g.false[k] == pytest.approx(v["false"], rel=1e-12, abs=1e-12)
        assert o.ospa[k] == pytest.approx(
            ss_o.compute_OSPA_distance(es[k], ts[k]).value, rel=1e-12, abs=1e-12)
    assert g.mean == pytest.approx(np.mean(g.gospa))
    assert np.all(g.switching == 0)  # switches are counted, at no cost


def test_gospa_switching_equals_stone_soup_for_p2():
    """p = 2 and every truth assigned from its first step: Stone Soup's
    sqrt(d^2 + switching^2) is kestrel's total; its switching part is gamma n^(1/2)."""
    pytest.importorskip("stonesoup")
    from stonesoup.metricgenerator.ospametric import GOSPAMetric

    truth = [np.array([[0.0, 0.0], [10.0, 0.0]])] * 4
    est = [np.array([[0.5, 0.0], [10.0, 0.5]]), np.array([[0.5, 0.0], [10.0, 0.5]]),
           np.array([[0.0, 0.5], [10.5, 0.0]]), np.array([[0.0, 0.5]])]
    est_ids = [np.array([0, 1]), np.array([0, 1]), np.array([1, 0]), np.array([1])]
    gamma = 2.0
    g = kestrel.gospa(truth, est, c=3.0, p=2.0, switching=gamma, truth_ids=[[0, 1]] * 4,
                      estimate_ids=est_ids)
    np.testing.assert_array_equal(g.switches, [0, 0, 2, 0.5])
    t0 = datetime.datetime(2024, 1, 1)
    ts, es = stonesoup_states(truth, t0), stonesoup_states(est, t0)
    flat = lambda s: [x for step in s for x in step]  # noqa: E731
    ids = lambda s: [i for step in s for i in step]  # noqa: E731
    ss = GOSPAMetric(c=3.0, p=2.0, switching_penalty=gamma).compute_over_time(
        flat(es), ids(est_ids), flat(ts), ids([[0, 1]] * 4))
    for k, m in enumerate(ss.value):
        assert g.gospa[k] == pytest.approx(m.value["distance"], rel=1e-12)
        assert g.switching[k] == pytest.approx(m.value["switching"] ** 2, rel=1e-12)


def test_clear_mot_counts_a_hand_made_case():
    truth = [np.array([[0.0, 0.0], [10.0, 0.0]])] * 3
    est = [np.array([[0.0, 1.0], [10.0, 1.0]]), np.array([[0.0, 1.0], [50.0, 0.0]]),
           np.array([[10.0, 2.0], [0.0, 2.0]])]
    ids = [np.array([7, 8]), np.array([7, 8]), np.array([7, 9])]
    m = kestrel.clear_mot(truth, est, c=5.0, estimate_ids=ids)
    np.testing.assert_array_equal(m.matches, [2, 1, 2])
    np.testing.assert_array_equal(m.misses, [0, 1, 0])
    np.testing.assert_array_equal(m.false, [0, 1, 0])
    # Step 2: track 7 moved to truth 1 and track 9 took truth 0: two identity switches.
    np.testing.assert_array_equal(m.switches, [0, 0, 2])
    assert m.total_truths == 6 and m.mota == pytest.approx(1 - (1 + 1 + 2) / 6)
    np.testing.assert_allclose(m.distance, [1.0, 1.0, 2.0])
    assert m.motp == pytest.approx((1 + 1 + 1 + 2 + 2) / 5)


def test_one_step_arrays_and_empty_sets():
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    g = kestrel.gospa(x, x[:1], c=10.0, p=2.0)
    assert g.gospa.shape == (1,) and g.gospa[0] == pytest.approx(np.sqrt(50.0))
    g = kestrel.gospa([[], x], [np.empty((0, 2)), []])
    np.testing.assert_allclose(g.gospa, [0.0, 10.0])
    assert kestrel.ospa([[]], [[]]).ospa[0] == 0.0


def test_a_simulated_scenario_is_tracked_with_low_gospa():
    s = kestrel.simulate_scenario(MODEL, 6, 40, "random", pd=0.95, clutter=5, region=1000,
                                  seed=11)
    res = kestrel.track(s.scans(), MODEL, clutter=s.clutter_density, confirm="3/4")
    c = 30.0
    g = kestrel.evaluate(s, res, "gospa", c=c, p=2.0, model=MODEL)
    # After confirmation every target has one track near it and no clutter track is
    # confirmed: the missed and false parts vanish, and the position error per target
    # is below that of the raw 5 m measurements (5 sqrt(2) m in 2-D).
    late = g.t >= 5
    assert np.all(g.missed[late] == 0) and np.all(g.false[late] == 0)
    assert np.all(np.sqrt(g.localisation[late] / 6) < 12.0)
    assert np.sqrt(np.mean(g.localisation[late]) / 6) < 5 * np.sqrt(2)
    assert np.mean(g.gospa[late]) < 15.0
    # Against no tracks at all, the metric is the cut-off cost of six missed targets.
    none = kestrel.gospa(s.truth_scans()[0], [np.empty((0, 2))] * 40, c=c)
    np.testing.assert_allclose(none.gospa, np.sqrt(6 * c**2 / 2))
    m = kestrel.evaluate(s, res, "mot", c=c, model=MODEL)
    assert m.mota > 0.9 and m.total_switches == 0


def test_bad_options_give_the_cli_messages(scenario_files, sim):
    d, det, _ = scenario_files
    z, t = sim.z.copy(), sim.t.copy()
    out = d / "never.csv"
    for opts in [dict(gate=1.5), dict(pd=0.0), dict(clutter=-1.0), dict(confirm="3/2"),
                 dict(confirm="x"), dict(delete=0), dict(delete_tentative=0),
                 dict(max_variance=-1.0), dict(dt=0.0), dict(jpda_marginals="lbp")]:
        want = cli_error("track", "--model", MODEL, "--detections", det, "--output", out,
                         *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.track(sim.z, MODEL, t=sim.t, **opts)
        assert str(e.value) == want, opts
    assert not out.exists()
    np.testing.assert_array_equal(sim.z, z)
    np.testing.assert_array_equal(sim.t, t)
    with pytest.raises(ValueError, match='assoc: unknown association "pdaf"'):
        kestrel.track(sim.scans(), MODEL, assoc="pdaf")
    with pytest.raises(TypeError, match="device"):
        kestrel.track(sim.scans(), MODEL, device=0)
    with pytest.raises(TypeError, match="model"):
        kestrel.track(sim.scans(), 3)
    with pytest.raises(OSError, match="missing.toml"):
        kestrel.track(sim.scans(), os.path.join(d, "missing.toml"))
    broken = d / "broken.toml"
    broken.write_text('[model]\nkind = "cv"\ndims = 2\ndt = 1.0\nq = -1.0\nr = 25.0\n')
    want = cli_error("track", "--model", broken, "--detections", det, "--output", out)
    with pytest.raises(kestrel.ModelError) as e:
        kestrel.track(sim.scans(), broken)
    assert str(e.value) == want


def test_bad_detections(tmp_path, sim):
    # Times out of order: the CLI names the line, Python the row of t.
    det = tmp_path / "det.csv"
    det.write_text("t,z0,z1\n0,1,2\n2,3,4\n1,5,6\n")
    want = cli_error("track", "--model", MODEL, "--detections", det, "--output",
                     tmp_path / "o.csv")
    z = np.array([[1.0, 2], [3, 4], [5, 6]])
    t = np.array([0.0, 2, 1])
    z0, t0 = z.copy(), t.copy()
    with pytest.raises(ValueError) as e:
        kestrel.track(z, MODEL, t=t)
    assert str(e.value).startswith("detections: t[2]: ")
    assert want.endswith(str(e.value)[len("detections: t[2]: "):])
    np.testing.assert_array_equal(z, z0)
    np.testing.assert_array_equal(t, t0)
    with pytest.raises(ValueError, match=r"t\[1\]: t = 0.5 is not an integer step \(give dt"):
        kestrel.track(z, MODEL, t=[0, 0.5, 1])
    with pytest.raises(ValueError, match=r"t\[1\]: t = 0.7 is not a multiple of dt 0.5"):
        kestrel.track(z, MODEL, t=[0, 0.7, 1], dt=0.5)
    # Components: the CLI's message.
    det.write_text("t,z0,z1,z2\n0,1,2,3\n")
    want = cli_error("track", "--model", MODEL, "--detections", det, "--output",
                     tmp_path / "o.csv")
    with pytest.raises(ValueError) as e:
        kestrel.track(np.ones((1, 3)), MODEL, t=[0])
    assert want.endswith(str(e.value))
    z[1, 1] = np.nan
    with pytest.raises(ValueError, match=r"detections\[1, 1\]: value nan is not finite"):
        kestrel.track(z, MODEL, t=[0, 1, 2])
    with pytest.raises(ValueError, match=r"detections\[1\]\[0, 1\]: value nan"):
        kestrel.track([z[:1], z[1:]], MODEL)
    with pytest.raises(ValueError, match=r"detections\[0\]: expected a scan"):
        kestrel.track([np.ones(2)], MODEL)
    with pytest.raises(ValueError, match="needs its times t"):
        kestrel.track(sim.z, MODEL)
    with pytest.raises(ValueError, match="t: 2 times for 3 detections"):
        kestrel.track(z0, MODEL, t=[0, 1])


def test_bad_metric_and_scenario_options(scenario_files, sim):
    d, det, truth = scenario_files
    tracks = d / "tracks-bad.csv"
    cli("track", "--model", MODEL, "--detections", det, "--output", tracks)
    res = kestrel.track(sim.scans(), MODEL)
    for opts in [dict(c=0.0), dict(p=0.5), dict(switching=-1.0)]:
        want = cli_error("eval", "--truth", truth, "--tracks", tracks, "--metric", "gospa",
                         *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.evaluate(sim, res, "gospa", **opts)
        assert str(e.value) == want
        with pytest.raises(ValueError) as e:
            kestrel.gospa([np.zeros((1, 2))], [np.zeros((1, 2))], **opts)
        assert str(e.value) == want
    with pytest.raises(ValueError, match="the tracks 3 .* give model to compare"):
        kestrel.evaluate(sim, (res.t, res.track, res.status, res.x[:, :3]), "gospa")
    with pytest.raises(ValueError, match="unknown metric"):
        kestrel.evaluate(sim, res, "hota")
    with pytest.raises(ValueError, match="different dimensions"):
        kestrel.gospa([np.zeros((1, 2))], [np.zeros((1, 3))])
    with pytest.raises(ValueError, match="1 and 2 steps"):
        kestrel.gospa([np.zeros((1, 2))], [np.zeros((1, 2))] * 2)
    for opts in [dict(pd=0.0), dict(clutter=-3.0), dict(death=2.0), dict(region=0.0),
                 dict(births=-1.0)]:
        want = cli_error("simulate", "--scenario", "random", "--model", MODEL, "--tracks", 2,
                         "--steps", 3, "--output", d / "x.csv", *cli_flags(opts))
        with pytest.raises(ValueError) as e:
            kestrel.simulate_scenario(MODEL, 2, 3, **opts)
        assert str(e.value) == want
    want = cli_error("simulate", "--scenario", "random", "--model", MODEL, "--tracks", 2,
                     "--steps", 0, "--output", d / "x.csv")
    with pytest.raises(ValueError) as e:
        kestrel.simulate_scenario(MODEL, 2, 0)
    assert str(e.value) == want
    with pytest.raises(ValueError, match="unknown scenario"):
        kestrel.simulate_scenario(MODEL, 2, 3, "spiral")


def test_progress_bar_only_when_asked(capfd):
    s = kestrel.simulate_scenario(MODEL, 3, 10, seed=1, clutter=1)
    kestrel.track(s.scans(), MODEL)
    assert capfd.readouterr().err == ""
    kestrel.track(s.scans(), MODEL, progress=True)
    err = capfd.readouterr().err
    assert "tracking" in err and "10/10 scans" in err


def test_the_gil_is_released_while_tracking():
    s = kestrel.simulate_scenario(MODEL, 2000, 40, clutter=1000, region=50000, seed=3)
    scans = s.scans()
    _, secs, during = ticks_while(lambda: kestrel.track(scans, MODEL, clutter=1e-6))
    assert secs > 0.05 and during >= 5, (secs, during)


def test_gpu_tracker_equals_the_cpu(sim):
    require_gpu()
    big = kestrel.simulate_scenario(MODEL, 400, 15, pd=0.9, clutter=200, region=20000,
                                    births=2, death=0.01, seed=3)
    for s in (sim, big):
        cpu = kestrel.track(s.scans(), MODEL, clutter=1e-5)
        gpu = kestrel.track(s.scans(), MODEL, clutter=1e-5, device="cuda")
        assert gpu.device.startswith("cuda") and cpu.device == "cpu"
        np.testing.assert_array_equal(gpu.t, cpu.t)
        np.testing.assert_array_equal(gpu.track, cpu.track)
        np.testing.assert_array_equal(gpu.status, cpu.status)
        np.testing.assert_allclose(gpu.x, cpu.x, rtol=1e-9, atol=1e-7)
        np.testing.assert_allclose(gpu.P, cpu.P, rtol=1e-9, atol=1e-7)
    assert kestrel.track(sim.scans(), MODEL, device="auto").device.startswith("cuda")
    # JPDA on the GPU: the same tracks as the CPU's.
    cpu = kestrel.track(sim.scans(), MODEL, clutter=1e-5, assoc="jpda")
    gpu = kestrel.track(sim.scans(), MODEL, clutter=1e-5, assoc="jpda", device="auto")
    assert gpu.device.startswith("cuda")
    np.testing.assert_array_equal(gpu.track, cpu.track)
    np.testing.assert_array_equal(gpu.status, cpu.status)
    np.testing.assert_allclose(gpu.x, cpu.x, rtol=1e-9, atol=1e-7)


RADAR_IMM = """
[imm]
transition = [[0.95, 0.05], [0.1, 0.9]]
initial = [0.8, 0.2]
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.5
omega = 0.0
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = 25.0
r_bearing = 4e-6
[[imm.mode]]
kind = "ct"
dt = 1.0
q = 0.5
omega = 0.1
measure = "range-bearing"
radar = [0.0, 0.0]
r_range = 25.0
r_bearing = 4e-6
[prior]
x0 = [0.0, 0.0, 0.0, 0.0]
P0 = [[1e6, 0, 0, 0], [0, 400.0, 0, 0], [0, 0, 1e6, 0], [0, 0, 0, 400.0]]
[filter]
kind = "ukf"
"""


@pytest.fixture(scope="module")
def radar(tmp_path_factory):
    """Radar plots t,range,bearing of three targets crossing the bearing's wrap, with
    clutter, and an IMM file of constant velocity and a turn."""
    d = tmp_path_factory.mktemp("radar")
    rng = np.random.default_rng(5)
    starts = [(-2000, -300, 0, 15), (-2600, 400, 0, -15), (-1500, 600, 5, 0)]
    rows = []
    for k in range(30):
        for x0, y0, vx, vy in starts:
            x, y = x0 + vx * k, y0 + vy * k
            if rng.random() < 0.95:
                b = np.angle(np.exp(1j * (np.arctan2(y, x) + 0.002 * rng.standard_normal())))
                rows.append((k, np.hypot(x, y) + 5 * rng.standard_normal(), b))
        for _ in range(3):
            rows.append((k, rng.uniform(0, 4000), rng.uniform(-np.pi, np.pi)))
    det = d / "plots.csv"
    with open(det, "w") as f:
        f.write("t,range,bearing\n")
        for r in rows:
            f.write(f"{int(r[0])},{float(r[1])!r},{float(r[2])!r}\n")
    model = d / "imm.toml"
    model.write_text(RADAR_IMM)
    a = np.array(rows)
    end = [(x0 + vx * 29, y0 + vy * 29) for x0, y0, vx, vy in starts]
    return d, det, model, a[:, 0], a[:, 1:], end


@pytest.mark.parametrize("opts", [dict(), dict(assoc="jpda", filter="ekf")],
                         ids=["imm-ukf-gnn", "imm-ekf-jpda"])
def test_imm_radar_tracking_equals_the_cli(radar, opts):
    d, det, model, t, z, end = radar
    out = d / f"tracks-{len(opts)}.csv"
    cli("track", "--model", model, "--detections", det, "--output", out, "--pd", 0.95,
        *cli_flags(opts))
    res = kestrel.track(z, kestrel.NonlinearFilter.from_toml(model), t=t, pd=0.95, **opts)
    check_same_tracks(res, out)
    head, rows = read_csv(out)
    assert head[-2:] == ["p0", "p1"]
    np.testing.assert_array_equal(res.mode_probs, numbers(rows, [len(head) - 2,
                                                                 len(head) - 1]))
    np.testing.assert_allclose(res.mode_probs.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # The file path reads the same way.
    by_path = kestrel.track(z, str(model), t=t, pd=0.95, **opts)
    np.testing.assert_array_equal(by_path.x, res.x)
    last = res.t == res.t.max()
    x = res.x[last & res.confirmed]
    assert len(x) == len(end)
    for ex, ey in end:
        assert np.min(np.hypot(x[:, 0] - ex, x[:, 2] - ey)) < 30.0


def test_nonlinear_tracking_errors(radar):
    d, det, model, t, z, _ = radar
    nl = kestrel.NonlinearFilter.from_toml(model)
    z0 = z.copy()
    for kw, needle in [
        (dict(device="cuda"), "runs on the CPU only"),
        (dict(filter="kf"), "kf is the linear Kalman filter's"),
        (dict(filter="pf"), 'unknown filter "pf"'),
    ]:
        with pytest.raises(ValueError, match=needle):
            kestrel.track(z, nl, t=t, **kw)
    np.testing.assert_array_equal(z, z0)
    with pytest.raises(ValueError, match="needs a nonlinear model file"):
        kestrel.track(z, MODEL_OBJ(), t=t, filter="ukf")
    with pytest.raises(ValueError, match="the model measures 2"):
        kestrel.track(np.zeros((4, 3)), nl, t=np.arange(4.0))


def MODEL_OBJ():
    return kestrel.KalmanFilter.from_toml(MODEL)


def test_the_radar_demo_tracks_recorded_air_traffic():
    """examples/python/radar_opensky.py without Stone Soup: the IMM tracks of simulated
    radar plots of recorded ADS-B traffic follow the aircraft."""
    import importlib.util
    path = os.path.join(REPO, "examples", "python", "radar_opensky.py")
    spec = importlib.util.spec_from_file_location("radar_opensky", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    truth, _ = demo.truth_scans()
    assert len(truth) == 121 and sum(map(len, truth)) == 2393
    scans = demo.radar_plots(truth, 0.9, 20.0, seed=1)
    density = 20.0 / (demo.RMAX * 2 * np.pi)
    n = sum(map(len, truth))
    for filt in (None, "ekf"):
        pos, ids, _, res = demo.run_kestrel(scans, 0.9, density, demo.imm_model(), filt)
        assert res.mode_probs.shape == (len(res), 3)
        c = 2000.0
        g = kestrel.gospa(truth, pos, c=c, p=2.0)
        missed = g.missed.sum() / (c * c / 2)
        rms = np.sqrt(g.localisation.sum() / (n - missed))
        # Nearly every aircraft position has a confirmed track within c, a few hundred
        # metres off (the bearing's 0.0017 rad is 170 m at 100 km).
        assert missed < 0.1 * n, (filt, missed)
        assert rms < 300.0, (filt, rms)


def test_the_radar_demo_tracks_recorded_shipping():
    """examples/python/radar_solent.py without Stone Soup: the IMM tracks of simulated
    coastal-radar plots of recorded AIS traffic follow the vessels."""
    import importlib.util
    path = os.path.join(REPO, "examples", "python", "radar_solent.py")
    spec = importlib.util.spec_from_file_location("radar_solent", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    truth, ids = demo.truth_scans()
    assert len(truth) == 287 and sum(map(len, truth)) == 19725
    assert len(np.unique(np.concatenate(ids))) == 78
    scene = demo.SOLENT
    scans = demo.radar_plots(truth, 0.9, 30.0, 1, scene)
    density = 30.0 / (scene.rmax * 2 * np.pi)
    n = sum(map(len, truth))
    pos, _, _, res = demo.run_kestrel(scans, 0.9, density, demo.imm_model(scene), scene=scene)
    assert res.mode_probs.shape == (len(res), 3)
    g = kestrel.gospa(truth, pos, c=scene.c, p=2.0)
    missed = g.missed.sum() / (scene.c ** 2 / 2)
    false = g.false.sum() / (scene.c ** 2 / 2)
    rms = np.sqrt(g.localisation.sum() / (n - missed))
    # Nearly every vessel position has a confirmed track within 500 m, metres off (range
    # sd 15 m, bearing 0.0035 rad: 35 m at 10 km), and false tracks are rare.
    assert missed < 0.05 * n, missed
    assert false < 0.02 * n, false
    assert rms < 25.0, rms
