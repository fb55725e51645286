"""Software prefetch for the compiled kernels: a hint that the CPU should start loading a
feature row into its caches before the loop reaches it (LLVM's ``llvm.prefetch``).

A hint changes no value a kernel computes, only when the bytes arrive. FPDGD's scoring reads one
contiguous block of rows per list, each list at another place in the feature matrix: the hardware
prefetcher learns each new block only after its first misses (``docs/commands/bench.md``,
"Prefetching and the exp underflow path"). Tests: ``tests/test_kernels_prefetch.py``.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

CACHE_LINE_BYTES = 64

_I32 = ir.IntType(32)


@intrinsic
def _prefetch(typingctx: Any, X: Any, row: Any, col: Any) -> tuple[Any, Callable[..., Any]]:
    """``llvm.prefetch`` of the address of ``X[row, col]`` (a read, kept in every cache level)."""
    def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: Any) -> Any:
        array = context.make_array(signature.args[0])(context, builder, args[0])
        address = cgutils.get_item_pointer(context, builder, signature.args[0], array, [args[1], args[2]])
        byte_pointer = ir.IntType(8).as_pointer()
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte_pointer, _I32, _I32, _I32]))
        builder.call(hint, [builder.bitcast(address, byte_pointer), ir.Constant(_I32, 0), ir.Constant(_I32, 3),
                            ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return types.void(X, row, col), codegen


@numba.njit(nogil=True, cache=True)
def prefetch_row(X: np.ndarray, row: int) -> None:
    """Start loading every cache line of ``X[row]`` (a C-contiguous 2-D array); no effect on results."""
    step = max(1, CACHE_LINE_BYTES // X.itemsize)
    for col in range(0, X.shape[1], step):
        _prefetch(X, row, col)
    if X.shape[1] > 0:
        _prefetch(X, row, X.shape[1] - 1)
