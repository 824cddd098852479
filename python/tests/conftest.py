import os

import numpy as np
import pytest


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
