import os
import re
import subprocess
import threading
import time

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("KESTREL_CLI", os.path.join(REPO, "target", "release", "kestrel"))


def gpu_available():
    import kestrel

    return kestrel.cuda_device_count() > 0


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def require_gpu():
    """Skips with a reason when no GPU is usable; fails instead with KESTREL_REQUIRE_GPU=1."""
    if gpu_available():
        return
    if os.environ.get("KESTREL_REQUIRE_GPU") == "1":
        pytest.fail("KESTREL_REQUIRE_GPU=1 but no usable CUDA GPU")
    pytest.skip("no usable CUDA GPU (set KESTREL_REQUIRE_GPU=1 to make this a failure)")


def cli(*args, check=True):
    """Runs the command line (KESTREL_CLI, else the release build; skips without it)."""
    if not os.path.exists(CLI):
        pytest.skip(f"no CLI at {CLI} (cargo build --release -p kestrel-cli)")
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"kestrel {' '.join(map(str, args))}: {r.stderr}")
    return r


def cli_error(*args):
    """The CLI's error message (exit 2), its flags written as keyword arguments."""
    r = cli(*args, check=False)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), line
    return re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), line[7:])


def ticks_while(fn):
    """Runs ``fn()`` while another Python thread ticks every millisecond: returns its
    result, the seconds it took and the ticks seen meanwhile (a thread that cannot take
    the GIL while kestrel runs ticks at most once)."""
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    th = threading.Thread(target=ticker)
    th.start()
    time.sleep(0.01)
    t0 = time.perf_counter()
    r = fn()
    t1 = time.perf_counter()
    stop.set()
    th.join()
    return r, t1 - t0, sum(1 for t in ticks if t0 < t < t1)
