"""Persistent user populations and their non-IID settings (``--population``, ``--non-iid``).

A population is N users ``0 .. N - 1`` kept in O(N) memory: nothing per user is stored but
what a counter-based hash of (seed, user, ...) gives back on demand -- the user's home query
set, intent, click model -- and the count of rounds each took part in (``federation.train``).

The non-IID settings follow the four types of Wang & Zuccon, "Is Non-IID Data a Threat in
Federated Online Learning to Rank?" (SIGIR 2022, Section 3), instantiated on one labelled split:

* ``document-preference(intents=G, share=s)`` (Type 1, document preferences): user ``u`` has
  intent ``g(u)`` of G; intent 0 judges documents by the data's labels, intent g > 0 gives a
  share ``s`` of each query's documents the label of another document of the same query (a
  hash of g and the row), so users of different intents prefer different documents of the same
  query. Per-user clicks.
* ``label-skew(sets=K, skew=p)`` (Type 2, label distribution skew): the training queries, in
  order of their mean label, are cut into K consecutive query sets; user ``u`` has home set
  ``h(u)`` and draws each query from it with probability p (else from the whole split).
* ``click-preference`` (Type 3, click preferences): user ``u`` clicks by its own cascade model,
  perfect / navigational / informational by a hash of u. Per-user clicks.
* ``data-quantity(alpha=a)`` (Type 4, data quantity skew): user ``u`` takes part with weight
  ``(u + 1) ** -a`` (a power law; a = 0 is uniform), so some users contribute far more
  interactions than others; each round's cohort is a weighted sample without replacement
  (Efraimidis & Spirakis keys ``log U / w``).

``iid`` (the default) leaves every run as before.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from fltr_audit.constraints import Interval, ParameterError
from fltr_audit.engine.clicks import cascade_model

SETTINGS = ("iid", "document-preference", "label-skew", "click-preference", "data-quantity")
PARAMETERS = {"document-preference": {"intents": int, "share": float}, "label-skew": {"sets": int, "skew": float},
              "click-preference": {}, "data-quantity": {"alpha": float}, "iid": {}}
CLICK_PREFERENCE_MODELS = ("perfect", "navigational", "informational")
NON_IID_HELP = ("Users' non-IID setting (Wang & Zuccon, SIGIR 2022): iid | document-preference(intents=4,share=0.5) | "
                "label-skew(sets=4,skew=0.8) | click-preference | data-quantity(alpha=1).")
_MULT = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93, 0xA0761D6478BD642F, 0xE7037ED1A0B428DB)
# salts of the per-user draws (the first key of counter_uniform), apart from the query streams
_HOME, _PICK, _INTENT, _SWAP, _OTHER, _MODEL = 1, 2, 3, 4, 5, 6


@dataclass(frozen=True)
class NonIID:
    """One non-IID setting and its parameters (see the module docstring)."""

    setting: str = "iid"
    intents: int = 4
    share: float = 0.5
    sets: int = 4
    skew: float = 0.8
    alpha: float = 1.0

    @property
    def name(self) -> str:
        """The canonical spelling, e.g. ``label-skew(sets=4,skew=0.8)``."""
        keys = PARAMETERS[self.setting]
        if not keys:
            return self.setting
        return f"{self.setting}({','.join(f'{k}={getattr(self, k):g}' for k in keys)})"

    @property
    def per_user_clicks(self) -> bool:
        """Whether users click differently from one another (the algorithm must support it)."""
        return self.setting in ("document-preference", "click-preference")


LIMITS = {"intents": Interval(int, 1, 1000), "share": Interval(float, 0, 1), "sets": Interval(int, 1, None),
          "skew": Interval(float, 0, 1), "alpha": Interval(float, 0, 5)}
"""The range of each setting's keyword (``fltr_audit.constraints``)."""


def parse_non_iid(spec: str | None) -> NonIID:
    """``non_iid`` (``--non-iid SPEC``): a setting name with optional ``(key=value, ...)`` (None:
    iid); ParameterError naming ``non_iid``, also for an empty or blank SPEC."""
    if spec is not None and not spec.strip():
        raise ParameterError("non_iid", f"empty ({spec!r}); write iid for the default, or one of {', '.join(SETTINGS)}")
    spec = (spec or "iid").strip()
    m = re.fullmatch(r"([a-z-]+)\s*(?:\((.*)\))?", spec)
    if not m or m.group(1) not in SETTINGS:
        raise ParameterError("non_iid", f"unknown setting {spec!r} (choose {', '.join(SETTINGS)})")
    setting, args = m.group(1), m.group(2)
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (args or "").split(","))):
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq or key not in PARAMETERS[setting]:
            allowed = ", ".join(PARAMETERS[setting]) or "none"
            raise ParameterError("non_iid", f"{setting} takes {allowed} as key=value, got {part!r}")
        try:
            values[key] = PARAMETERS[setting][key](raw.strip())
        except ValueError:
            raise ParameterError("non_iid", f"{setting} {key} must be a {PARAMETERS[setting][key].__name__}, "
                                 f"got {raw.strip()!r}") from None
    for key, value in values.items():
        if not LIMITS[key].accepts(value):
            raise ParameterError("non_iid", f"{setting} {key} must be {LIMITS[key].describe()}, got {value:g}")
    return replace(NonIID(setting), **values)


def check_buildable(non_iid: NonIID, n_queries: int) -> None:
    """ParameterError naming ``non_iid`` when the split cannot hold the setting (before training allocates)."""
    if non_iid.setting == "label-skew" and non_iid.sets > n_queries:
        raise ParameterError("non_iid", f"label-skew asks for {non_iid.sets} distinct query sets but the training "
                             f"split has {n_queries} queries")


def counter_uniform(seed: int, *keys: Any) -> np.ndarray:
    """Uniforms in [0, 1) from SplitMix64 of ``seed * 0x9E37.. + sum_i key_i * MULT_i`` (keys broadcast).

    Counter-based: a user's draws depend only on the seed and the keys, never on who else
    takes part or in which order, and nothing per user is stored.
    """
    mask = np.uint64(0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        for key, mult in zip(keys, _MULT):
            x = x + np.asarray(key, dtype=np.uint64) * np.uint64(mult)
        x = np.asarray(x, dtype=np.uint64) & mask
        for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
            x = (x ^ (x >> np.uint64(shift))) * np.uint64(mult)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _salted(seed: int, salt: int) -> int:
    return (int(seed) * 0x2545F4914F6CDD1D + salt * 0x9E3779B97F4A7C15) % 2**64


def user_choice(seed: int, salt: int, users: np.ndarray, n: int) -> np.ndarray:
    """A per-user choice among ``n`` (home set, intent, click model), from the user id alone."""
    return np.minimum((counter_uniform(_salted(seed, salt), users) * n).astype(np.int64), n - 1)


def query_sets(labels: np.ndarray, query_ptr: np.ndarray, sets: int) -> tuple[np.ndarray, np.ndarray]:
    """Label-skew query sets: the queries ordered by mean label (stable), cut into ``sets`` parts.

    Returns ``order`` (n_queries,) and ``bounds`` (sets + 1,): set j is ``order[bounds[j]:bounds[j+1]]``.
    """
    counts = np.diff(query_ptr)
    sums = np.add.reduceat(labels.astype(np.int64), query_ptr[:-1]) if len(labels) else np.zeros(0)
    mean = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    order = np.argsort(mean, kind="stable").astype(np.int64)
    bounds = np.linspace(0, len(order), sets + 1).astype(np.int64)
    return order, bounds


def skewed_queries(seed: int, non_iid: NonIID, users: np.ndarray, visits: np.ndarray, queries_per_client: int,
                   order: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Label-skew query streams (clients, B): with probability ``skew`` from the user's home set."""
    n = len(order)
    u = np.asarray(users, dtype=np.int64)[:, None]
    v = np.asarray(visits, dtype=np.int64)[:, None]
    b = np.arange(queries_per_client)[None, :]
    home = user_choice(seed, _HOME, users, non_iid.sets)[:, None]
    own = counter_uniform(_salted(seed, _PICK), u, v, b) < non_iid.skew
    pick = counter_uniform(_salted(seed, _OTHER), u, v, b)
    lo, size = bounds[home], bounds[home + 1] - bounds[home]
    in_home = order[lo + np.minimum((pick * size).astype(np.int64), size - 1)]
    anywhere = np.minimum((pick * n).astype(np.int64), n - 1)
    return np.where(own, in_home, anywhere)


def weighted_cohort(population: int, clients: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """``clients`` users drawn without replacement with weights ``(u + 1) ** -alpha`` (sorted ids).

    Efraimidis & Spirakis: the users with the largest ``log(U_u) / w_u``; O(population) per round.
    """
    keys = rng.random(population)
    np.log(keys, out=keys)
    inverse_weight = np.arange(1, population + 1, dtype=np.float64)
    np.power(inverse_weight, alpha, out=inverse_weight)
    keys *= inverse_weight  # log(U) / w with w = (u + 1) ** -alpha
    del inverse_weight
    return np.sort(np.argpartition(keys, population - clients)[population - clients:]).astype(np.int64)


@dataclass(frozen=True, eq=False)
class UserClicks:
    """Per-user click behaviour of a population: a click model whose ``simulate_users`` is told
    which user saw which rows (``simulate_clicks`` passes them)."""

    per_user: ClassVar[bool] = True
    """Declares ``simulate_users`` (read by ``simulate_clicks``)."""
    base: Any
    non_iid: NonIID
    seed: int
    models: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.base.name}+{self.non_iid.name}"

    def user_labels(self, labels: np.ndarray, query_ptr: np.ndarray, rows: np.ndarray, users: np.ndarray) -> np.ndarray:
        """The labels each user's intent gives the shown rows (document-preference), -1 on empty slots."""
        rows = np.asarray(rows, dtype=np.int64)
        ok = rows >= 0
        safe = np.where(ok, rows, 0)
        intent = user_choice(self.seed, _INTENT, users, self.non_iid.intents).reshape((-1,) + (1,) * (rows.ndim - 1))
        query = np.searchsorted(query_ptr, safe, side="right") - 1
        start, count = query_ptr[query], query_ptr[query + 1] - query_ptr[query]
        swap = (intent > 0) & (counter_uniform(_salted(self.seed, _SWAP), intent, safe) < self.non_iid.share)
        other = start + np.minimum((counter_uniform(_salted(self.seed, _OTHER), intent, safe) * count).astype(np.int64),
                                   count - 1)
        return np.where(ok, labels[np.where(swap, other, safe)], -1)

    def simulate_users(self, labels_shown: np.ndarray, data: Any, rows: np.ndarray, users: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
        """Clicks (n, k) of user ``users[i]`` on the rows ``rows[i]`` (labels ``labels_shown[i]``)."""
        if self.non_iid.setting == "document-preference":
            return self.base.simulate(self.user_labels(data.labels, data.query_ptr, rows, users), rng)
        which = user_choice(self.seed, _MODEL, users, len(self.models))
        clicks = np.zeros(labels_shown.shape, dtype=bool)
        for m, model in enumerate(self.models):  # a fixed order: the draws do not depend on the cohort's order
            sel = which == m
            if sel.any():
                clicks[sel] = model.simulate(labels_shown[sel], rng)
        return clicks


def check_per_user_clicks(non_iid: NonIID, algorithm_type: type) -> None:
    """ParameterError naming ``non_iid`` when the setting gives users their own clicks and the
    algorithm's type does not declare ``user_clicks = True`` (checked before any data is loaded)."""
    if non_iid.per_user_clicks and not getattr(algorithm_type, "user_clicks", False):
        raise ParameterError("non_iid", f"{non_iid.setting} gives each user its own clicks, which "
                             f"{getattr(algorithm_type, 'name', algorithm_type.__name__)} does not simulate (fpdgd, pdgd do)")


def with_population_clicks(algorithm: Any, non_iid: NonIID, seed: int) -> Any:
    """``algorithm`` itself, or a shallow copy clicking by :class:`UserClicks` when the setting gives
    users their own clicks; ParameterError unless the algorithm declares ``user_clicks = True``."""
    if not non_iid.per_user_clicks:
        return algorithm
    check_per_user_clicks(non_iid, type(algorithm))

    out = copy.copy(algorithm)
    out.click_model = user_clicks(algorithm.click_model, non_iid, seed)
    return out


def user_clicks(base: Any, non_iid: NonIID, seed: int) -> Any:
    """The click model of a population: ``base`` itself unless the setting gives users their own."""
    if not non_iid.per_user_clicks:
        return base
    models: tuple = ()
    if non_iid.setting == "click-preference":
        models = tuple(cascade_model(name, base.n_levels) for name in CLICK_PREFERENCE_MODELS)
    return UserClicks(base, non_iid, int(seed), models)


def simulate_clicks(click_model: Any, labels_shown: np.ndarray, data: Any, rows: np.ndarray, users: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray:
    """Clicks by ``click_model``: per user where its type declares ``per_user`` (``UserClicks``,
    ``engine.poisoning.PoisonedClicks``), else the same for all."""
    if getattr(type(click_model), "per_user", False):
        return click_model.simulate_users(labels_shown, data, rows, users, rng)
    return click_model.simulate(labels_shown, rng)
