"""A faithful simulation of secure aggregation by double masking (Bonawitz et al. 2017),
with the optional sparse neighbour graph of SecAgg+ (Bell et al. 2020).

Per round, for a cohort of n clients holding vectors x_u in Z_(2^k)^D:

0. AdvertiseKeys: each client makes two X25519 key pairs (c: share encryption, s: masks).
1. ShareKeys: each client draws a self-mask seed b_u and t-of-m Shamir-shares b_u and its
   mask secret key s_sk_u among its m holders (itself and its neighbours), each share sent
   to its holder AES-GCM-encrypted under an HKDF-SHA256 key from the c key agreement.
2. MaskedInputCollection: clients drop out here at the configured rate; every survivor sends
   y_u = x_u + PRG(b_u) + sum_{v in N(u), u < v} PRG(s_uv) - sum_{v in N(u), u > v} PRG(s_uv),
   s_uv = HKDF-SHA256(X25519(s_sk_u, s_pk_v)), PRG = AES-256-CTR keystream read as uint64.
3. (ConsistencyCheck is skipped: the server is honest-but-curious.)
4. Unmasking: from t surviving holders the server recovers b_u of each survivor and s_sk_u
   of each dropout, removes the self masks and recomputes the dropouts' pairwise masks.
   Fewer than t surviving holders for any secret it needs aborts the round.

Secret material (keys, seeds, Shamir coefficients) comes from the OS's cryptographic
generator; the numpy generator only drives simulation choices (dropouts, the neighbour graph,
stochastic rounding), so a run's *result* is reproducible while its masks are not.
Each symmetric secret is computed once per edge; the counters report what the real protocol
costs (both endpoints agree on each key).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from defenses import shamir
from defenses.secagg import SECAGG_CLAIM, draw_dropouts, require_vectors
from fltr_audit.errors import CohortLost, FltrError
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase
from fltr_audit.engine.messages import Messages

_ZERO_NONCE = bytes(16)
_CHUNK = 8192  # edges whose masks are materialized at once
_SHARE_BYTES = 4 * 16  # one share of a 32-byte secret: 16 field elements sent as uint32


def _kdf(shared: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def prg(seed: bytes, dim: int) -> bytes:
    """``dim`` uint64 words of AES-256-CTR keystream under ``seed``."""
    return Cipher(algorithms.AES(seed), modes.CTR(_ZERO_NONCE)).encryptor().update(bytes(8 * dim))


def _words(streams: list[bytes], dim: int, ring_mask: np.uint64) -> np.ndarray:
    return np.frombuffer(b"".join(streams), dtype="<u8").reshape(len(streams), dim) & ring_mask


def neighbour_graph(n: int, degree: int, rng: np.random.Generator) -> np.ndarray:
    """Each client's neighbours, (n, deg) sorted: the complete graph when ``degree`` is 0 or at
    least n - 1, else a random k-regular Harary graph (clients in a random ring order, each
    joined to the k/2 nearest on either side), as SecAgg+ uses."""
    if degree == 0 or degree >= n - 1:
        full = np.broadcast_to(np.arange(n), (n, n))
        return full[~np.eye(n, dtype=bool)].reshape(n, n - 1)
    order = rng.permutation(n)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    offsets = np.concatenate([np.arange(1, degree // 2 + 1), -np.arange(1, degree // 2 + 1)])
    return np.sort(order[(position[:, None] + offsets) % n], axis=1)


@dataclass(frozen=True)
class ProtocolResult:
    """The outcome of one protocol run.

    Attributes
    ----------
    total : uint64 (D,)
        The unmasked sum over survivors of their inputs, in Z_(2^k).
    survivors : bool (n,)
    transcript : dict
        What the server saw: ``masked`` (survivors' y_u, uint64 (n_alive, D)), ``public_keys``,
        ``ciphertexts`` (encrypted shares it relayed), ``unmask_shares`` (the shares it
        received in round 4) -- never an individual x_u.
    stats : dict
        Cost counters: key agreements, bytes up/down, clients, degree, threshold.
    """

    total: np.ndarray
    survivors: np.ndarray
    transcript: dict = field(repr=False)
    stats: dict


@dataclass
class ProtocolState:
    """What the protocol's rounds pass on (as Flower's SecAgg+ workflow keeps one state object
    across its stages): the inputs and parameters, then each round's keys, shares, masks and
    messages, and the counters of ``ProtocolResult.stats``."""

    inputs: np.ndarray
    bits: int
    neighbours: np.ndarray
    alive: np.ndarray
    threshold: float
    name: str
    stats: dict
    ring_mask: np.uint64
    c_keys: list = field(default_factory=list)
    s_keys: list = field(default_factory=list)
    c_pub: list = field(default_factory=list)
    s_pub: list = field(default_factory=list)
    holders: np.ndarray | None = None
    t: int = 0
    self_seeds: bytes = b""
    shares: np.ndarray | None = None
    pairwise: np.ndarray | None = None
    ciphers: dict = field(default_factory=dict)
    ciphertexts: dict = field(default_factory=dict)
    received: np.ndarray | None = None
    unmask_shares: np.ndarray | None = None
    total: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.inputs.shape[0]

    @property
    def dim(self) -> int:
        return self.inputs.shape[1]


def run_protocol(inputs: np.ndarray, bits: int, neighbours: np.ndarray, dropped: np.ndarray,
                 threshold: float, name: str = "secagg-protocol") -> ProtocolResult:
    """Run rounds 0-4 for clients with ring elements ``inputs`` (uint64 (n, D) < 2^bits).

    ``neighbours`` from ``neighbour_graph``; ``dropped`` marks clients lost after ShareKeys;
    each secret is shared t-of-m with t = floor(threshold * m) + 1 over its m holders. One
    function per round over a ``ProtocolState``; round 3 (ConsistencyChecks) is the malicious
    model's and is not run (semi-honest server).
    """
    n, dim = inputs.shape
    alive = ~np.asarray(dropped, dtype=bool)
    state = ProtocolState(
        inputs=inputs, bits=bits, neighbours=neighbours, alive=alive, threshold=threshold, name=name,
        ring_mask=np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(2**64 - 1),
        stats={"clients": n, "dimension": dim, "degree": neighbours.shape[1], "dropouts": int((~alive).sum()),
               "mask_key_agreements": 0, "encryption_key_agreements": 0, "bytes_up": 0, "bytes_down": 0})
    for protocol_round in (advertise_keys, share_keys, collect_masked_inputs, unmask):
        protocol_round(state)
    transcript = {"masked": state.received, "public_keys": (state.c_pub, state.s_pub),
                  "ciphertexts": state.ciphertexts, "unmask_shares": state.unmask_shares}
    return ProtocolResult(total=state.total, survivors=alive, transcript=transcript, stats=state.stats)


def advertise_keys(state: ProtocolState) -> None:
    """Round 0, AdvertiseKeys: every client's two X25519 key pairs (share encryption c, masks s)."""
    n, deg = state.n, state.neighbours.shape[1]
    state.c_keys = [X25519PrivateKey.generate() for _ in range(n)]
    state.s_keys = [X25519PrivateKey.generate() for _ in range(n)]
    state.c_pub = [k.public_key() for k in state.c_keys]
    state.s_pub = [k.public_key() for k in state.s_keys]
    state.stats["bytes_up"] += 64 * n
    state.stats["bytes_down"] += 64 * n * deg


def share_keys(state: ProtocolState) -> None:
    """Round 1, ShareKeys: t-of-m Shamir shares of each client's self-mask seed b_u and mask key
    s_sk_u to its holders (u and its neighbours, sorted), encrypted pairwise; the pairwise masks
    summed per client. FltrError for a cohort of one, t < 2, or no client alive."""
    n, dim, name, neighbours, alive = state.n, state.dim, state.name, state.neighbours, state.alive
    deg = neighbours.shape[1]
    stats = state.stats
    holders = np.sort(np.concatenate([np.arange(n)[:, None], neighbours], axis=1), axis=1)
    m = holders.shape[1]
    t = shamir.threshold(state.threshold, m)
    stats["threshold"] = t
    if n < 2:
        raise FltrError(f"{name}: a cohort of {n} client: the aggregate is that client's message; round aborted")
    if t < 2:
        raise FltrError(f"{name}: threshold={state.threshold:g} gives t = 1 of {m} share holders, so any one holder "
                        "reveals a client's masks (the aggregate-only claim needs t >= 2); raise threshold")
    if not alive.any():  # no secret is needed then, but the round has nothing to aggregate
        raise FltrError(f"{name}: only 0 of the {m} share holders of each client survived (0 of {n} clients "
                        f"alive), fewer than the threshold t = {t}; round aborted")
    self_seeds = os.urandom(32 * n)
    secret_keys = b"".join(k.private_bytes_raw() for k in state.s_keys)
    secrets = np.concatenate([shamir.bytes_to_field(self_seeds, n), shamir.bytes_to_field(secret_keys, n)], axis=1)
    points = holders[0] + 1 if (holders == holders[0]).all() else holders + 1
    shares = shamir.share(secrets, points, t)  # (n, m, 32)

    eu = np.repeat(np.arange(n), deg)
    ev = neighbours.ravel()
    keep = eu < ev
    eu, ev = eu[keep], ev[keep]
    flat_holders = (holders + n * np.arange(n)[:, None]).ravel()
    pos_uv = np.searchsorted(flat_holders, eu * n + ev) - eu * m  # where v sits among u's holders
    pos_vu = np.searchsorted(flat_holders, ev * n + eu) - ev * m
    payload = shares.astype("<u4")

    pairwise = np.zeros((n, dim), dtype=np.uint64)
    c_keys, c_pub, s_keys, s_pub = state.c_keys, state.c_pub, state.s_keys, state.s_pub
    ciphers, ciphertexts = state.ciphers, state.ciphertexts
    for start in range(0, len(eu), _CHUNK):
        streams = []
        for u, v, ju, jv in zip(eu[start:start + _CHUNK].tolist(), ev[start:start + _CHUNK].tolist(),
                                pos_uv[start:start + _CHUNK].tolist(), pos_vu[start:start + _CHUNK].tolist()):
            aead = AESGCM(_kdf(c_keys[u].exchange(c_pub[v]), b"fltr-audit secagg share encryption"))
            ciphers[u, v] = aead
            ciphertexts[u, v] = aead.encrypt(b"\x00" * 12, payload[u, ju].tobytes(), b"%d>%d" % (u, v))
            ciphertexts[v, u] = aead.encrypt(b"\x01" + b"\x00" * 11, payload[v, jv].tobytes(), b"%d>%d" % (v, u))
            streams.append(prg(_kdf(s_keys[u].exchange(s_pub[v]), b"fltr-audit secagg mask"), dim))
        masks = _words(streams, dim, state.ring_mask)
        np.add.at(pairwise, eu[start:start + _CHUNK], masks)
        np.subtract.at(pairwise, ev[start:start + _CHUNK], masks)
    stats["encryption_key_agreements"] += 2 * len(eu)
    stats["mask_key_agreements"] += 2 * len(eu)
    share_message = 12 + 2 * _SHARE_BYTES + 16
    stats["bytes_up"] += share_message * n * deg
    stats["bytes_down"] += share_message * n * deg
    state.holders, state.t, state.self_seeds, state.shares, state.pairwise = holders, t, self_seeds, shares, pairwise


def collect_masked_inputs(state: ProtocolState) -> None:
    """Round 2, MaskedInputCollection: y_u = x_u + PRG(b_u) + sum of pairwise masks (mod 2^bits)
    from the survivors (dropouts send nothing from here on)."""
    n, dim = state.n, state.dim
    self_masks = _words([prg(state.self_seeds[32 * u:32 * u + 32], dim) for u in range(n)], dim, state.ring_mask)
    masked = (state.inputs + self_masks + state.pairwise) & state.ring_mask
    state.received = masked[state.alive]
    state.stats["bytes_up"] += int(state.alive.sum()) * dim * math.ceil(state.bits / 8)


def unmask(state: ProtocolState) -> None:
    """Round 4, Unmasking: b_u of survivors and s_sk_u of dropouts with a surviving neighbour,
    each reconstructed from t decrypted shares; the sum of the survivors' inputs. FltrError
    when a needed secret has fewer than t surviving holders."""
    n, dim, name, alive, neighbours = state.n, state.dim, state.name, state.alive, state.neighbours
    holders, t, shares, stats, ring_mask = state.holders, state.t, state.shares, state.stats, state.ring_mask
    m = holders.shape[1]
    has_alive_neighbour = alive[neighbours].any(axis=1)
    needed = alive | has_alive_neighbour
    alive_holders = alive[holders]
    counts = alive_holders.sum(axis=1)
    short = np.flatnonzero(needed & (counts < t))
    if len(short):
        u = int(short[0])
        raise FltrError(f"{name}: only {counts[u]} of the {m} share holders of client {u} survived "
                        f"({int(alive.sum())} of {n} clients alive), fewer than the threshold t = {t}; round aborted")
    stats["bytes_down"] += int(alive.sum()) * 4 * n
    stats["bytes_up"] += int((alive_holders & needed[:, None]).sum()) * (4 + _SHARE_BYTES)

    targets = np.flatnonzero(needed)
    chosen = np.argsort(~alive_holders[targets], axis=1, kind="stable")[:, :t]  # first t alive holders
    chosen_holders = np.take_along_axis(holders[targets], chosen, axis=1)
    unmask_shares = np.empty((len(targets), t, 16), dtype=np.int64)
    for r, u in enumerate(targets.tolist()):
        part = slice(0, 16) if alive[u] else slice(16, 32)
        for j, v in enumerate(chosen_holders[r].tolist()):
            if v == u:
                unmask_shares[r, j] = shares[u, chosen[r, j], part]
                continue
            key = (u, v) if u < v else (v, u)
            nonce = b"\x00" * 12 if u < v else b"\x01" + b"\x00" * 11
            plain = state.ciphers[key].decrypt(nonce, state.ciphertexts[u, v], b"%d>%d" % (u, v))
            unmask_shares[r, j] = np.frombuffer(plain, dtype="<u4").reshape(-1)[part]
    recovered = shamir.reconstruct(chosen_holders + 1, unmask_shares)
    recovered_bytes = shamir.field_to_bytes(recovered)

    total = state.received.sum(axis=0, dtype=np.uint64)
    alive_targets = alive[targets]
    seeds = [recovered_bytes[r] for r in np.flatnonzero(alive_targets)]
    total -= _words([prg(s, dim) for s in seeds], dim, ring_mask).sum(axis=0, dtype=np.uint64)
    for r in np.flatnonzero(~alive_targets).tolist():
        u = int(targets[r])
        key = X25519PrivateKey.from_private_bytes(recovered_bytes[r])
        for v in neighbours[u][alive[neighbours[u]]].tolist():
            mask = _words([prg(_kdf(key.exchange(state.s_pub[v]), b"fltr-audit secagg mask"), dim)], dim, ring_mask)[0]
            stats["mask_key_agreements"] += 1
            total = total - mask if v < u else total + mask  # v added +mask when v < u
    state.total = total & ring_mask
    stats["key_agreements"] = stats["mask_key_agreements"] + stats["encryption_key_agreements"]
    state.unmask_shares = unmask_shares


@dataclass(frozen=True)
class FixedPoint:
    """Fixed-point encoding of reals in [-bound, bound] into Z_(2^bits) with ``frac`` fraction
    bits, leaving ceil(log2 n) bits of headroom (and one more for rounding up) so that the sum of n encodings cannot wrap."""

    bits: int
    frac: int
    bound: float

    @classmethod
    def for_cohort(cls, n: int, bound: float, bits: int, name: str = "secagg-protocol") -> "FixedPoint":
        """The finest scale whose n-fold sum fits in the signed ring, capped at 52 fraction-scaled
        bits so that encoding is exact in float64."""
        magnitude = math.ceil(math.log2(bound)) if bound > 1 else 0
        frac = min(bits - 2 - math.ceil(math.log2(max(n, 2))) - magnitude, 52 - magnitude)
        if frac < 1:
            raise FltrError(f"{name}: bits = {bits} leave no fraction bits for {n} clients with values up to {bound:g}")
        return cls(bits=bits, frac=frac, bound=float(bound))

    @property
    def resolution(self) -> float:
        return 2.0 ** -self.frac

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stochastically rounded ring elements (unbiased: E[decode(encode(x))] = x)."""
        z = np.clip(x, -self.bound, self.bound) * 2.0 ** self.frac
        low = np.floor(z)
        q = (low + (rng.random(z.shape) < (z - low))).astype(np.int64)
        return q.view(np.uint64) & np.uint64(2**self.bits - 1 if self.bits < 64 else 2**64 - 1)

    def decode(self, s: np.ndarray) -> np.ndarray:
        """Ring elements (a sum of encodings) back to reals, read as two's complement."""
        s = np.asarray(s, dtype=np.uint64)
        if self.bits < 64:
            signed = s.astype(np.int64) - np.where(s >= np.uint64(2 ** (self.bits - 1)), 2 ** self.bits, 0)
        else:
            signed = s.view(np.int64)
        return signed.astype(np.float64) * self.resolution


class SecAggProtocol(AggregatorBase):
    """``secagg-protocol(drop, k, threshold, bits, range)``: secure aggregation by the Bonawitz
    double-masking protocol (``run_protocol``). Each client sends n_c * clip(v_c, -range, range)
    as fixed point (``FixedPoint``, stochastic rounding) and n_c as an integer, both summed
    securely; the server divides. The server view is the sum, the survivors and the dropouts.

    The bound of n_c * v_c uses max_c n_c, taken as public (it is the configured number of
    local interactions). ``stats["error_bound"]`` bounds |mean - weighted mean of the clipped
    vectors|: each encoding rounds by less than one resolution step, so the sum is off by less
    than n_alive steps (plus float64 decoding, 2^-52 of the sum's bound), divided by sum n_c.
    """

    claim = SECAGG_CLAIM
    sees = "sum"
    """The server sees only the sum (a robust rule that needs more cannot join it)."""

    def __init__(self, drop: float = 0.0, k: int = 0, threshold: float = 0.5, bits: int = 64,
                 range: float = 64.0, name: str = "secagg-protocol"):
        self.drop, self.k, self.threshold, self.bits, self.range = float(drop), int(k), float(threshold), int(bits), float(range)
        self.name = name
        holders = shamir.fewest_holders(self.threshold)
        if self.k and holders > self.k + 1:  # past k + 1 clients each has k + 1 holders: t = 1 in any cohort
            enough = math.ceil(1e4 / (self.k + 1)) / 1e4  # four decimals, rounded up: 1/3 -> 0.3334
            raise FltrError(f"{name}: threshold={self.threshold:g} gives t = 1 of the k + 1 = {self.k + 1} share "
                            "holders of any cohort larger than k + 1, so any one holder reveals a client's masks "
                            f"(the aggregate-only claim needs t >= 2); raise threshold to at least {enough:g}")
        self.min_cohort = holders  # up to k + 1 clients the graph is complete: a cohort of m clients has m holders

    def check_cohort(self, n: int) -> None:
        """FltrError, at the door, when a cohort of ``n`` clients gives t = 1 or is a single client
        (below ``min_cohort`` <= k + 1 the graph is complete: each client's n share holders)."""
        if n < self.min_cohort:
            t = shamir.threshold(self.threshold, n)
            raise FltrError(f"a cohort of {n} client{'' if n == 1 else 's'} gives t = {t} of its {n} share holders at "
                            f"threshold={self.threshold:g}; the aggregate-only claim needs t >= 2 and at least 2 "
                            f"clients: {self.min_cohort} or more clients")

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        require_vectors(messages, self.name)
        if not np.isfinite(messages.vector).all():
            raise FltrError(f"{self.name}: client vectors contain NaN or infinity; fixed point cannot encode them")
        participants = np.asarray(participants)
        n = messages.n_clients
        weights = np.asarray(messages.n_interactions, dtype=np.int64)
        if int(weights.sum()) >= 2 ** self.bits:
            raise FltrError(f"{self.name}: bits={self.bits}: the weight sum {int(weights.sum())} of {n} clients "
                            f"does not fit the ring Z_2^{self.bits} (it would wrap); use more bits")
        bound = float(weights.max()) * self.range
        codec = FixedPoint.for_cohort(n, bound, self.bits, self.name)
        clipped = np.clip(messages.vector, -self.range, self.range)
        inputs = np.concatenate([codec.encode(clipped * weights[:, None], rng),
                                 weights.astype(np.uint64)[:, None]], axis=1)
        dropped = draw_dropouts(n, self.drop, rng)
        graph = neighbour_graph(n, self.k, rng)
        try:
            result = run_protocol(inputs, self.bits, graph, dropped, self.threshold, self.name)
        except FltrError as exc:
            if dropped.any():  # too few survivors: this cohort is lost, not the configuration
                raise CohortLost(str(exc)) from None
            raise
        total_weight = int(result.total[-1])
        mean = codec.decode(result.total[:-1]) / total_weight
        alive = result.survivors
        stats = dict(result.stats)
        stats.update(fraction_bits=codec.frac, clipped_coordinates=int((np.abs(messages.vector) > self.range).sum()),
                     error_bound=float(alive.sum() * codec.resolution + 2.0**-52 * alive.sum() * bound) / total_weight)
        return Aggregate(mean=mean, participants=participants[alive], dropouts=participants[~alive],
                         messages=None, stats=stats)
