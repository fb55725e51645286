"""The campaign file's tables: the keys each may hold and their types, the defaults, and the map
from the engine's parameter names to campaign keys (``CAMPAIGN_KEYS``).

A campaign is a TOML grid of audits, expanded into runs (``spec.grid``), executed and stored.

A campaign file has these tables (every key optional except ``name``)::

    name = "defense-comparison"
    seeds = [0, 1, 2]

    [data]
    spec = ["synthetic:mq2008"]          # paths or synthetic:PROFILE
    folds = [1]
    normalization = "zscore"             # none | query-minmax | zscore

    [algorithm]
    name = ["fpdgd"]                     # fpdgd | foltr-es | fedips | fedavg
    rounds = [20]
    clients = [1000]
    queries_per_client = [4]
    ranker = ["linear"]
    train_click_model = "perfect"
    params = { lr = 0.1 }                # algorithm-specific; list values expand too

    [probe]
    split = "vali"
    click_models = ["perfect", "navigational", "informational"]
    probe_cohort = [100]                 # clients per probed cohort (`cohort`: deprecated)
    queries_per_client = 1
    min_shown = 10
    require_click = true
    threat_model = "server"              # server | server-blind | server-malicious (a grid axis)
    manipulation = "isolate"             # server-malicious: isolate | inconsistent
    min_effect = 0.05                    # lists planned so that a leak of this AUC is found, and zero
    power = 0.9                          #   leakage shown, with this probability (fltr_audit.spec.plan)
    lists = 600                          # or a fixed number of lists per click model (no plan)

    [audit]
    defenses = ["none", "clip(sensitivity=5)+dp-distributed(eps=4.5)", "secagg"]
    attacks = ["olsr", "score", "prob", "distance", "random3", "random4"]
    epsilon_audit = true
    trials = 10000                       # per input of the empirical epsilon audit

    [audit_run]                          # optional: each run also audits its whole run with canaries
    canaries = 1000                      # (fltr-audit audit-run; table run_audits), at most the population
    runs = 1                             # independent canary runs (multi-run bound from 2 on)

    [unlearning]                         # optional: each run also audits forgetting with canaries
    method = ["retrain", "federaser"]    # (fltr-audit audit-unlearning; table unlearning_audits), a grid axis
    forget = 100                         # population users forgotten besides the included canaries
    canaries = 40                        # each included with probability 1/2, every included one forgotten
    poison_check = true                  # the ECIR 2024 check: the forgotten users poison the run

Unless ``probe.lists`` fixes it, each click model is probed with the lists planned from
``probe.min_effect`` and ``probe.power`` over the informed attacks (``fltr_audit.spec.plan``), so
that the leakage verdicts can decide; ``campaign run`` prints the plan and its expected time.

Grid axes: ``seeds``, ``data.spec``, ``data.folds``, every list of ``[algorithm]``
(including inside ``params``), ``probe.split``, ``probe.probe_cohort``, ``probe.threat_model`` and
``audit.defenses`` and ``unlearning.method``.
The click models and attacks of a run are evaluated inside it, on the same trained model
and the same probe, so they are lists but not axes. Each grid point is one run whose key is
the SHA-256 of its resolved configuration (canonical JSON), so the key is stable across
processes and machines and changes with any setting.
"""

from __future__ import annotations

from typing import Any

from fltr_audit.engine.algorithms.registry import algorithm_names
from fltr_audit.spec.audit_options import DEFAULT_MIN_EFFECT, DEFAULT_POWER

ALGORITHMS = algorithm_names(auditable=True)
"""The built-in algorithms a campaign can audit (``fltr_audit.engine.algorithms.registry``; plug-ins join on lookup)."""
CLICK_MODELS = ("perfect", "navigational", "informational")

SCHEMA: dict[str, dict[str, tuple[type, ...]]] = {
    "": {"name": (str,), "seeds": (int, list), "data": (dict,), "algorithm": (dict,), "probe": (dict,), "audit": (dict,),
         "audit_run": (dict,), "unlearning": (dict,)},
    "data": {"spec": (str, list), "folds": (int, list), "normalization": (str,), "queries": (int,)},
    "algorithm": {
        "name": (str, list),
        "rounds": (int, list),
        "clients": (int, list),
        "queries_per_client": (int, list),
        "ranker": (str, list),
        "train_click_model": (str,),
        "params": (dict,),
        "population": (int,),
        "non_iid": (str, list),
        "poison": (str, list),
    },
    "probe": {
        "split": (str, list),
        "click_models": (str, list),
        "probe_cohort": (int, list),
        "queries_per_client": (int,),
        "min_shown": (int,),
        "require_click": (bool,),
        "counterfactual": (int,),
        "threat_model": (str, list),
        "manipulation": (str,),
        "lists": (int,),
        "rounds": (int,),
        "min_effect": (float, int),
        "power": (float, int),
    },
    "audit": {"defenses": (str, list), "attacks": (str, list), "epsilon_audit": (bool,), "trials": (int, str)},
    "audit_run": {"canaries": (int,), "runs": (int,)},
    "unlearning": {"method": (str, list), "forget": (int,), "canaries": (int,), "poison_check": (bool,)},
}

DEFAULTS: dict[str, Any] = {
    "seeds": [0],
    "data": {"spec": ["synthetic:mq2008"], "folds": [1], "normalization": "zscore", "queries": None},
    "algorithm": {
        "name": ["fpdgd"],
        "rounds": [20],
        "clients": [1000],
        "queries_per_client": [4],
        "ranker": ["linear"],
        "train_click_model": "perfect",
        "params": {},
    },
    "probe": {
        "split": ["vali"],
        "click_models": list(CLICK_MODELS),
        "probe_cohort": [100],
        "queries_per_client": 1,
        "min_shown": 10,
        "require_click": True,
        "counterfactual": 20,
        "threat_model": ["server"],
        "manipulation": "isolate",
        "lists": None,   # lists to score per click model (probe rounds until then); None: planned
        "rounds": None,  # probe rounds (passes over the split) at most; None: 1, or 50 with lists
        "min_effect": DEFAULT_MIN_EFFECT,  # the plan: lists for this leak (AUC) ...
        "power": DEFAULT_POWER,            # ... at this power; None (from Python only): one pass, no plan
    },
    "audit": {
        "defenses": ["none"],
        "attacks": ["olsr", "score", "prob", "distance", "random3", "random4"],
        "epsilon_audit": True,
        "trials": 10000,
    },
    "audit_run": {  # the whole-run canary audit of every run (run_audits); off without canaries
        "canaries": None,
        "runs": 1,
    },
    "unlearning": {  # the unlearning audit of every run (unlearning_audits); off without a method
        "method": None,
        "forget": 0,
        "canaries": 40,
        "poison_check": False,
    },
}



CAMPAIGN_KEYS = {
    # the run spec's parameters (fltr_audit.spec.run) that a campaign file spells otherwise
    "data.fold": "data.folds", "seed": "seeds", "audit.run_canaries": "audit_run.canaries",
    "audit.run_runs": "audit_run.runs", "probe.cohort": "probe.probe_cohort",
    "audit.unlearning": "unlearning.method", "audit.unlearning_forget": "unlearning.forget",
    "audit.unlearning_canaries": "unlearning.canaries", "audit.unlearning_poison_check": "unlearning.poison_check",
    # the engine's parameters, as the key that sets them
    "data": "data.spec", "fold": "data.folds", "queries": "data.queries", "normalization": "data.normalization",
    "clients": "algorithm.clients", "rounds": "algorithm.rounds", "queries_per_client": "algorithm.queries_per_client",
    "ranker": "algorithm.ranker", "population": "algorithm.population", "non_iid": "algorithm.non_iid",
    "poison": "algorithm.poison",
    "click_model": "probe.click_models", "split": "probe.split", "threat_model": "probe.threat_model",
    "manipulation": "probe.manipulation", "defense": "audit.defenses", "attacks": "audit.attacks",
    "trials": "audit.trials", "canaries": "audit_run.canaries", "runs": "audit_run.runs", "method": "unlearning.method",
    "forget": "unlearning.forget", "poison_check": "unlearning.poison_check",
}
"""The engine's parameter names as campaign keys: the campaign reader's one map (``validate_spec``
renames every ParameterError by it, once; a name not here is already the key)."""


def as_list(value: Any) -> list:
    """A list value as is, a scalar as a one-item list (a grid axis of one point)."""
    return value if isinstance(value, list) else [value]


DEPRECATED_KEYS = {("probe", "cohort"): "probe_cohort"}
"""Old campaign keys, (table, key) -> the key's current name in that table."""

