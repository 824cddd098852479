"""The helpers kestrel.dask's modules share (``kestrel.dask``, ``kestrel._dask_tbd``):
Dask imported when first used, block offsets, and what every worker-side task does
with its block and its errors."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:  # pragma: no cover - exercised only without dask
        raise ImportError(
            "kestrel.dask needs Dask: pip install 'dask[array]' distributed"
        ) from e
    return dask, da


def _offsets(chunks: tuple) -> list[int]:
    return [0, *itertools.accumulate(chunks)][:-1]


def _note(e: BaseException, where: str) -> BaseException:
    if hasattr(e, "add_note"):
        e.add_note(f"(in the Dask block of {where})")
    return e


def _aligned(a: Any) -> np.ndarray:
    """A C-contiguous, aligned array: blocks that Dask ships inside a message may arrive
    at an unaligned address, which the native module does not read in place."""
    return np.require(a, requirements=("C", "A"))
