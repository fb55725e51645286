"""What the server sees of a defense stack on two chosen inputs, as audit mechanisms
(``attacks.epsilon_bounds.Mechanism``: ``(rng, n, which) -> n outputs on input which``).

* ``message_mechanism``: one client's defended message (rows of a cohort are independent trials);
* ``aggregate_mechanism``: the cohort mean of the client transforms (secure aggregation);
* ``noisy_aggregate_mechanism``: the mean a noisy aggregator releases (dp-fedavg, ddgauss, or an
  aggregator plug-in that declares nothing);
* ``shuffle_mechanism``: a shuffled cohort, as its messages' log-likelihood ratios.

What a stack does is read from the mechanisms its parts declare (``fltr_audit.privacy.mechanisms``),
never from their attribute names.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from attacks.epsilon_bounds import Mechanism, Statistic
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.constraints import Interval, check
from fltr_audit.engine.messages import Messages


def noise_declarations(stack: Any) -> list[Any]:
    """The noise mechanisms the stack's client defenses declare, in order."""
    return [m for m in (mech.declared(d) for d in stack.client) if isinstance(m, mech.NOISE)]


def undeclared_client(stack: Any) -> list[Any]:
    """The stack's client defenses that declare no mechanism (a plug-in: unknown transform)."""
    return [d for d in stack.client if mech.declared(d) is None]


def metric_randomizer(stack: Any) -> mech.RandomizedResponse | None:
    """The randomized response the stack's client defenses declare, if any."""
    found = [m for m in noise_declarations(stack) if isinstance(m, mech.RandomizedResponse)]
    return found[-1] if found else None


class _NoNoise:
    """A stand-in generator whose every draw is zero: running the stack with it gives the
    noise-free output (the clipped input), the centre of the noise distribution."""

    @staticmethod
    def _zeros(*args: Any, size: Any = None, **kwargs: Any) -> np.ndarray:
        return np.zeros(size)

    def __getattr__(self, name: str) -> Any:
        return self._zeros


def run_client(stack: Any, updates: np.ndarray, rng: Any, g: np.ndarray | None = None,
               kind: str = "update") -> np.ndarray:
    """The stack's client transforms on a cohort of ``updates`` relative to the global model ``g``
    (zero by default), sent as ``kind`` (weights or update) as the algorithm sends them; returns
    the defended updates."""
    g = np.zeros(updates.shape[1]) if g is None else np.asarray(g, dtype=np.float64)
    updates = np.asarray(updates, dtype=np.float64)
    msgs = Messages(n_interactions=np.ones(len(updates), dtype=np.int64), vector_kind=kind,
                    vector=updates + g if kind == "weights" else updates.copy())
    for defense in stack.client:
        msgs = defense.apply(msgs, g, rng)
    return msgs.updates(g)


def centre(stack: Any, update: np.ndarray, g: np.ndarray | None = None, kind: str = "update") -> np.ndarray:
    """The noise-free output of the stack's client transforms on one update."""
    return run_client(stack, np.asarray(update, dtype=np.float64)[None, :], _NoNoise(), g, kind)[0]


def clipped(update: np.ndarray, clip: float) -> np.ndarray:
    """``update`` scaled to L2 norm at most ``clip``."""
    norm = float(np.linalg.norm(update))
    return update * min(1.0, clip / norm) if norm > 0 else update


def message_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int,
                      g: np.ndarray | None = None, kind: str = "update") -> Mechanism:
    """One client's defended message on input ``which``; the client defenses see cohorts of
    ``cohort`` clients (Gamma shares are calibrated to the cohort size), every row of a cohort an
    independent trial (client transforms treat rows independently)."""
    if metric_randomizer(stack) is not None:
        def rr_mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
            metric = np.full((n, 1), float(inputs[which][0]))
            msgs = Messages(n_interactions=np.ones(n, dtype=np.int64), seed=np.zeros(n, dtype=np.uint64),
                            metric=metric)
            for defense in stack.client:
                msgs = defense.apply(msgs, np.zeros(0), rng)
            return msgs.metric
        return rr_mechanism
    per_cohort = any(isinstance(m, mech.GammaShares) for m in noise_declarations(stack)) or bool(undeclared_client(stack))

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        u = np.asarray(inputs[which], dtype=np.float64)
        if not per_cohort:
            return run_client(stack, np.repeat(u[None, :], n, axis=0), rng, g, kind)
        out = np.empty((n, len(u)))
        for start in range(0, n, cohort):
            rows = min(cohort, n - start)
            out[start:start + rows] = run_client(stack, np.repeat(u[None, :], cohort, axis=0), rng, g, kind)[:rows]
        return out

    return mechanism


def aggregate_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int,
                        others: np.ndarray | None = None, g: np.ndarray | None = None,
                        kind: str = "update") -> Mechanism:
    """The cohort mean the server sees: the audited client on input ``which`` plus ``cohort - 1``
    others (rows of ``others``, drawn at random, or zero updates -- fixed inputs the attacker
    knows, the worst case), all through the client defenses; one trial per cohort."""
    check("cohort", cohort, (Interval(int, 2, None),), "the clients an aggregate sums")
    if not stack.client:
        return _untransformed_aggregate(inputs, cohort, others, g, kind)

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        u = np.asarray(inputs[which], dtype=np.float64)
        out = np.empty((n, len(u)))
        rows = np.zeros((cohort, len(u)))
        rows[0] = u
        for t in range(n):
            if others is not None:
                rows[1:] = others[rng.integers(0, len(others), size=cohort - 1)]
            out[t] = run_client(stack, rows, rng, g, kind).mean(axis=0)
        return out

    return mechanism


def _untransformed_aggregate(inputs: tuple[np.ndarray, np.ndarray], cohort: int, others: np.ndarray | None,
                             g: np.ndarray | None, kind: str) -> Mechanism:
    """``aggregate_mechanism`` of a stack without client transforms (plain secure aggregation), many
    trials at once: no transform draws from the stream, so trial t's members are the t-th draw of
    ``others`` rows, as one trial at a time draws them, and its mean sums the members in the same
    order (``(u + g) - g`` for weights, as ``Messages.updates``): the same bits, ``TRIAL_CHUNK_VALUES``
    at a time."""
    g = None if g is None else np.asarray(g, dtype=np.float64)

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        u = np.asarray(inputs[which], dtype=np.float64)
        out = np.empty((n, len(u)))
        step = max(1, TRIAL_CHUNK_VALUES // (cohort * max(len(u), 1)))
        for lo in range(0, n, step):
            rows = np.zeros((min(step, n - lo), cohort, len(u)))
            rows[:, 0] = u
            if others is not None:
                rows[:, 1:] = others[rng.integers(0, len(others), size=(len(rows), cohort - 1))]
            if kind == "weights":
                zero = np.zeros(len(u)) if g is None else g
                rows = (rows + zero) - zero
            out[lo:lo + len(rows)] = rows.mean(axis=1)
        return out

    return mechanism


TRIAL_CHUNK_VALUES = 1 << 22
"""Update coordinates of the cohorts simulated at a time by ``_untransformed_aggregate``."""


def noisy_aggregate_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int,
                              others: np.ndarray | None = None) -> Mechanism:
    """The mean a noisy aggregator releases for a fixed cohort of ``cohort``: the target holding
    update ``inputs[which]``, the ``cohort - 1`` others zero updates (fixed and known: the worst
    case of the mean) or the rows of ``others`` (a robust rule's worst case,
    ``attacks.robust_neighbours``), every member still adding its noise share; one aggregation per trial, each by a fresh
    copy of the aggregator (adaptive clipping's clip starts where the stack's does) -- or all trials
    at once by an aggregator that simulates such rounds itself (``zero_cohort_means``, equal in law:
    ``ddgauss``, used only with zero others)."""
    batched = stack.aggregator.zero_cohort_means if others is None else None

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        if batched is not None:
            return batched(inputs[which], cohort, n, rng)
        rows = np.zeros((cohort, len(inputs[which])))
        rows[0] = inputs[which]
        if others is not None:
            rows[1:] = others
        msgs = Messages(vector=rows, vector_kind="update", n_interactions=np.ones(cohort, dtype=np.int64))
        ids = np.arange(cohort)
        return np.stack([copy.copy(stack.aggregator).aggregate(msgs, ids, rng).mean for _ in range(n)])

    return mechanism


def separable_coordinates(stack: Any, inputs: tuple[np.ndarray, np.ndarray]) -> np.ndarray | None:
    """The coordinates where the two inputs differ, when a message's law there does not depend on
    the others: both inputs zero elsewhere (a clip reads the same norm without them) and the client
    transforms declaring one noise added independently per coordinate (Laplace or Gamma shares,
    which ``tests/test_mechanism_audit.py`` checks against the full messages); None otherwise."""
    if undeclared_client(stack):
        return None
    comps = noise_declarations(stack)
    if len(comps) != 1 or not isinstance(comps[0], (mech.Laplace, mech.GammaShares)):
        return None
    a, b = (np.asarray(x, dtype=np.float64) for x in inputs)
    differ = a != b
    return np.flatnonzero(differ) if not (a[~differ].any() or b[~differ].any()) else None


SHUFFLE_CHUNK_VALUES = 1 << 18
"""Message coordinates simulated at a time by ``shuffle_mechanism`` (bounded memory at any trials). Small
enough that the arrays of a chunk (2 MB) are reused from the heap: at 1 << 22 (32 MB, which glibc's
malloc always maps afresh) every chunk page-faulted its arrays again (``audit-defense
"dp-local-laplace(eps=1)+shuffle" --dim 136 --probe-cohort 1000 --trials 2000``: 8.2 -> 5.9 s, 431 -> 256 MB)."""


def shuffle_mechanism(stack: Any, inputs: tuple[np.ndarray, np.ndarray], cohort: int, message_llr: Statistic,
                      g: np.ndarray | None = None, kind: str = "update") -> Mechanism:
    """The shuffled cohort the server receives (replace-one worst case): the target's local input
    ``inputs[which]``, the ``cohort - 1`` others all holding ``inputs[0]``, each through the local
    randomizer, then the stack's shuffler. Returned as the shuffled messages' log-likelihood
    ratios ``log p1(y_i) / p0(y_i)`` (``message_llr``), in the shuffled order: every message
    coordinate where the inputs agree has the same law under both, so the ratios are a
    sufficient statistic of the multiset (the server's view) and keep the audit's memory small.
    Trials are simulated ``SHUFFLE_CHUNK_VALUES`` message coordinates at a time."""
    single = message_mechanism(stack, inputs, cohort, g, kind)
    rr = metric_randomizer(stack) is not None
    ids = np.arange(cohort)

    def shuffled_llrs(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        target, others = single(rng, n, which), single(rng, n * (cohort - 1), 0)
        others = others.reshape(n, cohort - 1, *others.shape[1:])
        shuffled = np.empty((n, cohort, *others.shape[2:]))
        for t in range(n):
            rows = np.concatenate([target[t:t + 1], others[t]])
            fields = ({"metric": rows, "seed": np.zeros(cohort, dtype=np.uint64)} if rr
                      else {"vector": rows, "vector_kind": "update"})
            view = stack.aggregator.aggregate(Messages(n_interactions=np.ones(cohort, dtype=np.int64), **fields),
                                              ids, rng).messages
            shuffled[t] = view.metric if rr else view.vector
        return np.asarray(message_llr(shuffled.reshape(n * cohort, -1))).reshape(n, cohort)

    def mechanism(rng: np.random.Generator, n: int, which: int) -> np.ndarray:
        step = max(1, SHUFFLE_CHUNK_VALUES // (cohort * len(inputs[which])))
        return np.concatenate([shuffled_llrs(rng, min(step, n - lo), which) for lo in range(0, n, step)])

    return mechanism
