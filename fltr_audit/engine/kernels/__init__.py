"""Compiled kernels for the engine's hot loops (numba ``njit``).

Each kernel is a plain loop over clients (or lists) that numpy can only express with padded
copies or one Python call per client. The conventions, so that results stay reproducible:

- compiled with ``nogil=True`` and called on parts of the cohort through ``threads.thread_map``
  -- the project's one source of parallelism (never numba's ``parallel=True``: its thread
  layer is not fork-safe and would nest inside the pool), so a part's results depend on its
  own rows only, whatever the number of threads or the executor;
- ``cache=True``: compiled once per machine (the cache lives beside the module);
- every kernel has a numpy reference (``tests/test_kernels_*.py``) it is checked against;
- small arguments go through ``kernel_array``, so every caller shares one compiled variant: numba
  compiles one per layout and flags, and a strided variant may sum in another order (a broadcast
  model once gave FPDGD's scores other last bits). The feature matrix is passed as it is (a
  read-only memory map must not be copied).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def kernel_array(a: Any, dtype: Any) -> np.ndarray:
    """``a`` as a C-contiguous writable array of ``dtype`` -- a copy only when it is not one."""
    return np.require(a, dtype, ["C", "W"])
