"""``fltr_audit.train``: train a ranker with a federated algorithm that has no command of its own
(FPDGD, PDGD, plug-ins) -- ``fltr-audit train NAME`` -- into an output folder
(``store.run_folder``), with the privacy its defense spends over the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from defenses.accounting import ParticipationSchedule, privacy_spent
from fltr_audit.constraints import Options, ParameterError, check
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.data.load import load_splits
from fltr_audit.engine.federation import train as federated_train
from fltr_audit.engine.population import check_buildable, parse_non_iid
from fltr_audit.engine.randomness import check_seed
from fltr_audit.engine.training import TrainHooks, TrainSettings, check_budget, check_population, check_threat_model
from fltr_audit.errors import FltrError
from fltr_audit.runs.robustness import check_robustness, prepared
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.store.interceptors import RecordingInterceptor, check_record_rounds
from fltr_audit.store.run_folder import run_folder, write_run

OnRound = Callable[[int, dict], None]
"""Called with each round's curve row, in order (a progress bar's step)."""
Note = Callable[[str], None]
"""Where a training says what it decided for the user (one line; the command line prints it on stderr)."""


def quiet_note(text: str) -> None:
    """Say nothing (the Python API's default)."""


def resolve_normalization(algorithm: str, normalization: str) -> str:
    """``auto`` becomes the algorithm's declared default (as in ``audit``)."""
    return algorithms.algorithm_spec(algorithm).default_normalization if normalization == "auto" else normalization


def resolve_replace(replace: Optional[bool], clients: int, queries_per_client: int, n_queries: int,
                    note: Note = quiet_note) -> bool:
    """Sample a round's queries with replacement when asked, or -- left unset -- when a round
    needs more queries than the split has (saying so once, through ``note``)."""
    if replace is not None:
        return replace
    needed = clients * queries_per_client
    if needed > n_queries:
        note(f"note: a round needs {needed:,} queries (--clients x --queries-per-client) and the training "
             f"split has {n_queries:,}: sampling them with replacement")
    return needed > n_queries


def parse_params(items: list[str], algorithm: str, lr: float | None = None) -> dict[str, Any]:
    """``--param KEY=VALUE`` items (and ``--lr``) as the algorithm's keywords: each value read as
    an int, a float, true / false or else text, then checked against the algorithm's declared
    parameters; an error names what the user typed (``--lr``, ``--param KEY``)."""
    params: dict[str, Any] = {}
    typed = {"lr": "--lr"} if lr is not None else {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise FltrError(f"--param: expected KEY=VALUE, got {item!r}")
        params[key.strip()] = _literal(raw.strip())
        typed[key.strip()] = f"--param {key.strip()}"
    if lr is not None:
        params["lr"] = lr
    try:
        algorithms.algorithm_spec(algorithm).check_params(params)
    except ParameterError as exc:
        raise exc.renamed(typed, where=f"train {algorithm}: ") from None
    return params


def _literal(raw: str) -> Any:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def train(algorithm: str, *, data: str, out: str | Path | None = None, fold: int = 1, click_model: str | None = None,
          clients: int = 1000, queries_per_client: int = 4, rounds: int = 100, params: dict[str, Any] | None = None,
          ranker: str = "linear", seed: int = 0, defense: str = "none", record_rounds: Optional[str] = None,
          eval_every: int = 1, eval_split: str = "test", normalization: str = "auto", threat_model: str = "server",
          replace: Optional[bool] = None, population: Optional[int] = None, non_iid: str = "iid",
          poison: str = "none", on_round: OnRound | None = None, note: Note = quiet_note) -> dict:
    """Train ``algorithm`` (``fltr-audit train NAME``: FPDGD, PDGD, plug-ins): load, train, write
    ``curves.csv``, ``model.npy``, ``config.json`` (and a recording) into ``out``; return the result
    (final offline nDCG@10, throughput, the privacy spent over the run). ``poison`` makes a fraction of
    every cohort malicious (``fltr_audit.spec.poison``)."""
    stack = DefenseSpec.parse(defense).build()
    poison_spec = check_robustness(poison, algorithm, stack, clients)
    params = dict(params or {})
    out = None if out is None else Path(out)
    spec = algorithms.algorithm_spec(algorithm)
    click_model = click_model or spec.train_click_model
    check_budget(clients, queries_per_client, rounds, eval_every)
    check_seed(seed)
    check("eval_split", eval_split, (Options(("vali", "test")),))
    check_population(population, clients)
    users = parse_non_iid(non_iid)
    check_threat_model(threat_model)
    check_record_rounds(record_rounds, rounds, out)  # bad input fails before any data is loaded
    normalization = resolve_normalization(algorithm, normalization)
    splits = load_splits(data, fold, normalization=normalization)
    eval_data = splits.get(eval_split)
    check_buildable(users, splits.train.n_queries)
    replace = resolve_replace(replace, clients, queries_per_client, splits.train.n_queries, note)
    alg = algorithms.build(algorithm, splits, click_model, {"ranker": ranker, "seed": seed, "clients": clients,
                                                             "queries_per_client": queries_per_client,
                                                             "params": params})
    poisoning, stack = prepared(poison_spec, stack, alg, splits.train, queries_per_client, seed)
    with run_folder(out) as tmp:
        interceptors = [] if record_rounds is None else [
            RecordingInterceptor(tmp / "recording", record_rounds, algorithm=algorithm, defense=stack.name)]
        res = federated_train(alg, splits.train,
                              TrainSettings(clients=clients, queries_per_client=queries_per_client, rounds=rounds,
                                            seed=seed, eval_every=eval_every, threat_model=threat_model, replace=replace,
                                            population=population, non_iid=users),
                              eval_data=eval_data, defenses=stack,
                              hooks=TrainHooks(interceptors=interceptors, on_round=on_round), poisoning=poisoning)
        config = {**res.config, "data": data, "fold": fold, "normalization": normalization, "eval_split": eval_split,
                  "defense": stack.name, "record_rounds": record_rounds, "n_features": splits.train.n_features,
                  "n_levels": splits.train.n_levels}
        write_run(tmp, res.curves, res.params, config)
    last = res.curves.iloc[-1]
    return {"out": None if out is None else str(out), "algorithm": algorithm, "defense": stack.name,
            **({"poison": poison_spec.text} if poison_spec is not None else {}),
            "final_offline_ndcg10": float(last["offline_ndcg10"]), "online_ndcg": float(last["online_ndcg"]),
            "n_interactions": res.n_interactions, "seconds": res.seconds,
            "interactions_per_second": res.n_interactions / res.seconds if res.seconds > 0 else float("nan"),
            "privacy": privacy_spent(stack, ParticipationSchedule.of_run(seed, rounds, clients, population)).as_dict()}
