"""t-of-m Shamir secret sharing over the prime field GF(p), p = 4194301 < 2^22, vectorized.

Secrets are byte strings cut into 16-bit chunks (each a field element) and shared chunk by
chunk with one polynomial of degree t-1 per chunk. The field is small so that a block of 256
products of field elements sums exactly in float64 (256 * p^2 < 2^53): share evaluation and
Lagrange recombination are then BLAS matrix products reduced mod p.
"""

from __future__ import annotations

import math
import os

import numpy as np

PRIME = 4194301
_BLOCK = 256


def threshold(fraction: float, holders: int) -> int:
    """t = floor(fraction * m) + 1 of m holders: the shares that reconstruct a secret (t >= 2: no
    single holder learns it)."""
    return int(math.floor(fraction * holders)) + 1


def fewest_holders(fraction: float) -> int:
    """The fewest holders m >= 2 with ``threshold(fraction, m) >= 2``: from ceil(1 / fraction) up (the
    float product can fall one short: 5 * 0.19999999999999998 < 1)."""
    holders = max(2, math.ceil(1.0 / fraction))
    while threshold(fraction, holders) < 2:
        holders += 1
    return holders


def random_field(shape: tuple[int, ...]) -> np.ndarray:
    """Uniform field elements from the OS's cryptographic generator (bias < 2^-41)."""
    raw = np.frombuffer(os.urandom(8 * int(np.prod(shape))), dtype=np.uint64)
    return (raw % np.uint64(PRIME)).astype(np.int64).reshape(shape)


def mod_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b mod p`` for int64 arrays of field elements (broadcasting like ``np.matmul``)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    inner = a.shape[-1]
    out = None
    for s in range(0, inner, _BLOCK):
        part = a[..., s:s + _BLOCK] @ b[..., s:s + _BLOCK, :]
        out = np.fmod(part if out is None else out + part, PRIME)
    return out.astype(np.int64)


def mod_pow(a: np.ndarray, e: int) -> np.ndarray:
    """Element-wise ``a^e mod p`` by square and multiply (products < 2^44 fit in int64)."""
    result = np.ones_like(a)
    base = a % PRIME
    while e:
        if e & 1:
            result = result * base % PRIME
        base = base * base % PRIME
        e >>= 1
    return result


def bytes_to_field(secrets: bytes, n_secrets: int) -> np.ndarray:
    """``n_secrets`` equal-length byte strings (concatenated) as (n_secrets, c) 16-bit chunks."""
    return np.frombuffer(secrets, dtype="<u2").astype(np.int64).reshape(n_secrets, -1)


def field_to_bytes(chunks: np.ndarray) -> list[bytes]:
    """The inverse of ``bytes_to_field``: one byte string per row."""
    return [row.tobytes() for row in chunks.astype("<u2")]


def share(secrets: np.ndarray, xs: np.ndarray, t: int) -> np.ndarray:
    """Shares of each secret at its holders' points.

    Parameters
    ----------
    secrets : int64 (S, c) field elements, one row per secret.
    xs : int64 (S, m) or (m,) distinct non-zero evaluation points (the holders' ids + 1).
    t : threshold; any t shares recover a secret, fewer reveal nothing.

    Returns
    -------
    int64 (S, m, c): ``shares[s, j]`` belongs to the holder at ``xs[s, j]``.
    """
    S, c = secrets.shape
    coef = random_field((S, t, c))
    coef[:, 0] = secrets
    powers = np.ones(xs.shape + (t,), dtype=np.int64)
    for d in range(1, t):
        powers[..., d] = powers[..., d - 1] * xs % PRIME
    if xs.ndim == 1:  # one Vandermonde matrix for all secrets: a single large product
        flat = mod_matmul(powers, coef.transpose(1, 0, 2).reshape(t, S * c))
        return flat.reshape(len(xs), S, c).transpose(1, 0, 2)
    return mod_matmul(powers, coef)


def lagrange_at_zero(xs: np.ndarray) -> np.ndarray:
    """Lagrange weights ``prod_{j != i} x_j / (x_j - x_i)`` mod p, for each row of xs (R, t)."""
    rows, inverse = np.unique(xs, axis=0, return_inverse=True)
    num = np.ones_like(rows)
    den = np.ones_like(rows)
    for j in range(rows.shape[1]):
        xj = rows[:, j:j + 1]
        same = np.arange(rows.shape[1]) == j
        num = np.where(same, num, num * xj % PRIME)
        den = np.where(same, den, den * ((xj - rows) % PRIME) % PRIME)
    weights = num * mod_pow(den, PRIME - 2) % PRIME
    return weights[np.asarray(inverse).reshape(-1)]


def reconstruct(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The secrets (R, c) from t shares each: points xs (R, t), shares ys (R, t, c)."""
    weights = lagrange_at_zero(xs)
    return mod_matmul(weights[:, None, :], ys)[:, 0]
