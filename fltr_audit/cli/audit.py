"""`fltr-audit audit`: pre-train, probe every click model under every defense, attack, score."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pandas as pd
import typer

from fltr_audit.engine.algorithms.registry import algorithm_names
from fltr_audit.cli.app import app
from fltr_audit.cli.common import emit_json, parse_list, print_table, progress
from fltr_audit.cli.compare import check_min_effect, min_effect_option
from fltr_audit.constraints import OPEN_UNIT, Interval, ParameterError, check
from fltr_audit.errors import FltrError, RunsFailed
from fltr_audit.engine.population import NON_IID_HELP
from fltr_audit.runs.robustness import POISON_HELP

DEFAULT_CLICK_MODELS = "perfect,navigational,informational"
TABLE_COLUMNS = ["attack", "click_model", "defense", "threat_model", "accuracy", "precision", "recall", "f1",
                 "n_queries"]
SCORE_COLUMNS = ["reference", "auc", "auc_counterfactual", "leakage", "leakage_normalized", "advantage",
                 "advantage_counterfactual", "tpr_at_fpr_0_01", "tpr_at_fpr_0_001"]  # where the rows have them


def algo_help() -> str:
    """``--algo``'s help: the registered auditable algorithms, then the installed plug-ins (read
    from their entry points, none imported)."""
    from fltr_audit import plugins

    installed = [name for name in plugins.installed(plugins.ALGORITHMS) if name not in algorithm_names()]
    return " | ".join(algorithm_names(auditable=True)) + "." + (
        f" Installed plug-ins: {', '.join(installed)}." if installed else "")


def audit_spec(*, algo: str, data: str, folds: list[int], rounds: int, clients: int, queries_per_client: int,
               attacks: list[str], defenses: list[str], click_models: list[str], split: str, seeds: list[int],
               cohort: int, probe_queries: int, normalization: str, ranker: str, min_shown: int,
               require_click: bool, epsilon_audit: bool, trials: int | str = 10000, counterfactual: int = 20,
               name: str = "audit", population: int | None = None, threat_model: str = "server",
               manipulation: str = "isolate", non_iid: str = "iid", probe_lists: int | None = None,
               poison: list[str] | None = None) -> dict:
    """A campaign spec (fltr_audit.runs.campaign) for the audit command's options; a bad value is a
    ParameterError naming the engine's parameter (the door renames it). With poisonings, every defense
    also trains without one (its privacy side) and under each of them (integrity)."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.runs.campaign import validate_spec

    algorithm = algorithm_spec(algo, auditable=True)
    return validate_spec(
        {
            "name": name,
            "seeds": seeds,
            "data": {"spec": [data], "folds": folds,
                     "normalization": algorithm.default_normalization if normalization == "auto" else normalization},
            "algorithm": {"name": algo, "rounds": rounds, "clients": clients, "queries_per_client": queries_per_client,
                          "ranker": ranker, "train_click_model": algorithm.train_click_model,
                          **({"population": population} if population is not None else {}),
                          **({"non_iid": non_iid} if non_iid != "iid" else {}),
                          **({"poison": ["none", *[p for p in poison if p != "none"]]} if poison else {})},
            "probe": {"split": split, "click_models": click_models, "cohort": cohort,
                      "queries_per_client": probe_queries, "min_shown": min_shown, "require_click": require_click,
                      "counterfactual": counterfactual, "threat_model": threat_model,
                      "manipulation": manipulation, **({"lists": probe_lists} if probe_lists is not None else {})},
            "audit": {"defenses": defenses, "attacks": attacks, "epsilon_audit": epsilon_audit, "trials": trials},
        },
        source="audit options",
        keys=False,
    )


def trials_option(text: str) -> int | str:
    """``--trials``: a number of trials per input, or ``auto`` (sized to each defense's claim)."""
    text = str(text).strip()
    if text == "auto":
        return text
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise ParameterError("trials", f"must be a number of trials or 'auto', got {text!r}") from None


def algorithm_defaults(algo: str, attack: str, click_model: str, min_shown: int | None
                       ) -> tuple[list[str], list[str], int]:
    """The attacks, probe click models and ``--min-shown`` of an audit, each option left at its
    default replaced by the algorithm's declared default (``fltr_audit.engine.algorithms.registry``)."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.engine.clicks import CCM_TABLES

    spec = algorithm_spec(algo, auditable=True)
    attacks = parse_list(attack, "attacks") if attack else list(spec.default_attacks)
    if click_model == DEFAULT_CLICK_MODELS:
        click_model = ",".join(spec.probe_click_models())
    models = parse_list(click_model, "click_model", tuple(sorted({m for m, _ in CCM_TABLES})) + ("pbm",))
    return attacks, models, spec.k if min_shown is None else min_shown


def spec_from_options(*, algo: str, data: str, fold: list[int], train_rounds: int, clients: int,
                      queries_per_client: int, attack: str, defense: list[str], click_model: str, split: str,
                      seed: list[int], probe_cohort: int, probe_queries: int, normalization: str, ranker: str,
                      min_shown: int | None, require_click: bool, epsilon_audit: bool, trials: int | str,
                      counterfactual: int = 20, population: int | None = None, threat_model: str = "server",
                      manipulation: str = "isolate", non_iid: str = "iid", probe_lists: int | None = None,
                      poison: list[str] | tuple = ()) -> dict:
    """The campaign spec of the ``audit`` command's options (named as its parameters); the
    Python API (``fltr_audit.audit``) builds its runs through this too, so both give the same numbers.
    A bad value is a ParameterError naming the engine's parameter; each door renames it."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.engine.federation import check_population
    from fltr_audit.engine.population import parse_non_iid

    check_population(population, clients)
    users = parse_non_iid(non_iid)
    if users.per_user_clicks and not algorithm_spec(algo, auditable=True).user_clicks:
        raise ParameterError("non_iid", f"{users.setting} gives each user its own clicks, which {algo} does not simulate")
    non_iid = users.name
    trials = trials_option(trials)
    attacks, models, min_shown = algorithm_defaults(algo, attack, click_model, min_shown)
    return audit_spec(algo=algo, data=data, folds=list(fold), rounds=train_rounds, clients=clients,
                      queries_per_client=queries_per_client, attacks=attacks, defenses=list(defense),
                      click_models=models, split=split, seeds=list(seed), cohort=probe_cohort,
                      probe_queries=probe_queries, normalization=normalization, ranker=ranker,
                      min_shown=min_shown, require_click=require_click, epsilon_audit=epsilon_audit,
                      trials=trials, counterfactual=counterfactual, population=population,
                      threat_model=threat_model, manipulation=manipulation, non_iid=non_iid, probe_lists=probe_lists,
                      poison=list(poison))


def probe_size(probe_lists: int | None, power: float | None, min_effect: float, attacks: list[str],
               available: int) -> int | None:
    """The lists to score per click model: ``--probe-lists`` as given, else planned from
    ``--min-effect`` and ``--power`` (``reports.leakage.planned_lists`` over the informed
    attacks), else None (one pass over the probe split). One-line errors name the option:
    ``--probe-lists`` below 1 or beyond the ``available`` lists (queries of the split times
    ``MAX_PROBE_ROUNDS`` probe rounds), ``--power`` outside (0, 1)."""
    from attacks.registry import attack_spec
    from fltr_audit.engine.probe import MAX_PROBE_ROUNDS
    from reports.leakage import planned_lists

    if power is not None:
        check("power", power, OPEN_UNIT)
    if probe_lists is None and power is not None:
        informed = sum(not attack_spec(a).reference for a in attacks)
        probe_lists = planned_lists(min_effect, power, informed)
        if probe_lists > available:
            raise ParameterError("power", f"{power:g} at a minimum effect of {min_effect:g} needs {probe_lists:,} lists "
                                 f"per click model, beyond the {available:,} available; lower it or raise the minimum effect")
    if probe_lists is not None:
        check("probe.lists", probe_lists, (Interval(int, 1, available),),
              f"the probe split's queries times {MAX_PROBE_ROUNDS} probe rounds")
    return probe_lists


def available_lists(data: str, folds: list[int], split: str, normalization: str, seeds: list[int]) -> int:
    """Lists the probe can issue per click model: the smallest probe split over the folds
    times ``MAX_PROBE_ROUNDS`` (the data loaded once here, cached for the runs)."""
    from fltr_audit.engine.data.load import load_splits
    from fltr_audit.engine.probe import MAX_PROBE_ROUNDS

    sizes = [load_splits(data, f, normalization=normalization, seed=seeds[0]).get(split).n_queries for f in folds]
    return min(sizes) * MAX_PROBE_ROUNDS


def run_spec(spec: dict, store: Path | None, quiet: bool) -> dict[str, pd.DataFrame]:
    """Run a spec in this process (or into ``store``) and return its concatenated tables."""
    from fltr_audit.runs.campaign import execute_run, expand, run_campaign
    from fltr_audit.store.results import ResultsStore, load

    runs = expand(spec)
    with progress(len(runs), "audit runs", quiet) as bar:
        if store is not None:
            results = ResultsStore(store)
            run_campaign(spec, results, workers=1, on_done=lambda run, error: bar.advance())
            failed = results.status().query("status == 'failed'")
            if len(failed):
                first = failed.iloc[0]
                raise RunsFailed(f"{len(failed)} run(s) failed in {store}; run {first['run_key']}: {first['error']}")
            tables = load(store)
            keys = {r.key for r in runs}
            return {name: t[t["run_key"].isin(keys)] if "run_key" in t else t for name, t in tables.items()}
        collected: dict[str, list[pd.DataFrame]] = {}
        for run in runs:
            result = execute_run(run.spec)
            for name, table in result["tables"].items():
                collected.setdefault(name, []).append(table.assign(run_key=run.key))
            bar.advance()
    return {name: pd.concat(parts, ignore_index=True) for name, parts in collected.items()}


def attack_table(tables: dict[str, pd.DataFrame], averaging: str = "macro") -> pd.DataFrame:
    """Pham's Table 4 shape extended by a defense column and the threshold-free scores: one row
    per attack x click model x defense, means over seeds and folds (``n_queries`` summed)."""
    attacks = tables["attacks"]
    rows = attacks[attacks["averaging"] == averaging]
    group = ["attack", "click_model", "defense", "threat_model"]
    grouped = rows.groupby(group, sort=False)
    scores = [c for c in SCORE_COLUMNS if c in rows.columns and c != "reference"]
    table = grouped[["accuracy", "precision", "recall", "f1", *scores]].mean()
    table["n_queries"] = grouped["n_queries"].sum().astype(int)  # over seeds and folds
    if "reference" in rows.columns:
        table["reference"] = grouped["reference"].any()
    extra = []
    if "n_counterfactual" in rows.columns:
        table["n_counterfactual"] = grouped["n_counterfactual"].first()
        extra.append("n_counterfactual")
    return table.reset_index()[TABLE_COLUMNS + [c for c in SCORE_COLUMNS if c in table.columns or c in group] + extra]


def _print_attacks(table: pd.DataFrame) -> None:
    """The attack table within 100 columns: AUC, counterfactual AUC, leakage, TPR at 1 % FPR and F1;
    each defense and click model named once."""
    from fltr_audit.cli.verdict_tables import print_rows, wrap_name

    def num(row, col, fmt):
        return format(row[col], fmt) if col in row and pd.notna(row[col]) else "n/a"

    rows, previous = [], (None, None)
    for _, r in table.iterrows():
        same_defense = r["defense"] == previous[0]
        rows.append({"defense": "" if same_defense else wrap_name(r["defense"], 18),
                     "clicks": "" if same_defense and r["click_model"] == previous[1] else r["click_model"],
                     "attack": f"{r['attack']}{' (ref.)' if bool(r.get('reference', False)) else ''}",
                     "AUC": num(r, "auc", ".3f"), "AUC cf.": num(r, "auc_counterfactual", ".3f"),
                     "leakage": num(r, "leakage", "+.3f"), "TPR@1%": num(r, "tpr_at_fpr_0_01", ".3f"),
                     "F1": num(r, "f1", ".3f")})
        previous = (r["defense"], r["click_model"])
    lists = table["n_queries"]
    count = f"{lists.min():,}" if lists.min() == lists.max() else f"{lists.min():,} to {lists.max():,}"
    print_rows(f"Attacks, means over runs ({count} lists per row); leakage = AUC real - counterfactual",
               rows, right=("AUC", "AUC cf.", "leakage", "TPR@1%", "F1"))


def manipulation_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per click model x defense x manipulation of ``server-malicious`` runs: the other
    members' nDCG@10 served honestly and manipulated, and the difference (empty otherwise)."""
    attacks = tables["attacks"]
    if "manipulation" not in attacks or attacks["manipulation"].isna().all():
        return pd.DataFrame()
    rows = attacks.dropna(subset=["manipulation"])
    cols = ["others_ndcg_honest", "others_ndcg_served", "others_ndcg_cost"]
    return rows.groupby(["click_model", "defense", "manipulation"], sort=False)[cols].mean().reset_index()


@app.command("audit")
def audit(
    algo: str = typer.Option("fpdgd", "--algo", help=algo_help()),
    data: str = typer.Option("synthetic:mq2008", "--data", help="Data set path or synthetic:PROFILE."),
    fold: List[int] = typer.Option([1], "--fold", help="Fold(s) 1-5; repeat for several."),
    train_rounds: int = typer.Option(20, "--train-rounds", help="Pre-training rounds (Pham: 20)."),
    clients: int = typer.Option(1000, "--clients", help="Clients per training round."),
    queries_per_client: int = typer.Option(4, "--queries-per-client", help="Queries per client per round (B)."),
    attack: str = typer.Option("", "--attack", help="Comma-separated attacks (default: the algorithm's set)."),
    defense: List[str] = typer.Option(["none"], "--defense", help="Defense stack(s); repeat or comma-separate."),
    click_model: str = typer.Option(DEFAULT_CLICK_MODELS, "--click-model",
                                    help="Comma-separated click models for the probe (FedIPS: pbm)."),
    split: str = typer.Option("vali", "--split", help="Probe split (Pham: vali)."),
    seed: List[int] = typer.Option([0], "--seed", help="Seed(s); repeat for several."),
    probe_cohort: int = typer.Option(100, "--probe-cohort", help="Probe clients per cohort (secure aggregation)."),
    probe_queries: int = typer.Option(1, "--probe-queries", help="Queries per probe message."),
    normalization: str = typer.Option("auto", "--normalization", help="auto | none | query-minmax | zscore."),
    ranker: str = typer.Option("linear", "--ranker", help="linear | mlp."),
    min_shown: int = typer.Option(None, "--min-shown",
                                  help="Score only lists with at least this many documents (default: a full list, "
                                       "10, or K = 5 for FedIPS)."),
    require_click: bool = typer.Option(True, "--require-click/--all-lists", help="Score only lists with a click."),
    epsilon_audit: bool = typer.Option(True, "--epsilon-audit/--no-epsilon-audit",
                                       help="Audit each defense's claimed epsilon empirically."),
    trials: str = typer.Option("10000", "--trials", help="Trials per input of the empirical epsilon audits, or "
                               "'auto': sized to each defense's claim (capped at 1,000,000)."),
    counterfactual: int = typer.Option(20, "--counterfactual",
                                       help="Counterfactual click vectors drawn per probed list (the leakage baseline)."),
    population: int = typer.Option(None, "--population",
                                   help="N persistent users the training cohorts are drawn from (default: --clients)."),
    non_iid: str = typer.Option("iid", "--non-iid", help=NON_IID_HELP),
    poison: List[str] = typer.Option([], "--poison", help=POISON_HELP + " Repeat for several; every defense also "
                                     "trains without poisoning, for its privacy side."),
    min_effect: float = min_effect_option(),
    probe_lists: int = typer.Option(None, "--probe-lists",
                                    help="Lists to score per click model: the probe repeats the split with new "
                                         "clients until then (default: one pass, or planned by --power)."),
    power: float = typer.Option(None, "--power",
                                help="Plan --probe-lists so that a leak of --min-effect is found, and zero "
                                     "leakage shown, with this probability (0-1)."),
    threat_model: str = typer.Option("server", "--threat-model",
                                     help="server | server-blind | server-malicious (the server manipulates the "
                                          "probed round to isolate one target; fpdgd)."),
    manipulation: str = typer.Option("isolate", "--manipulation",
                                     help="server-malicious: isolate (zero features for the others) | "
                                          "inconsistent (a saturated model for the others)."),
    store: Path = typer.Option(None, "--store", help="Also record the runs in this SQLite store."),
    json_out: bool = typer.Option(False, "--json", help="Print the records as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Audit a federated ranker: which clicks can the server guess from client messages?"""
    from fltr_audit.cli.verdict_tables import print_verdicts
    from reports.compare import verdicts

    min_effect = check_min_effect(min_effect)
    if probe_lists is not None or power is not None:
        from fltr_audit.engine.algorithms.registry import algorithm_spec

        attacks, _, _ = algorithm_defaults(algo, attack, click_model, min_shown)
        norm = algorithm_spec(algo, auditable=True).default_normalization if normalization == "auto" else normalization
        probe_lists = probe_size(probe_lists, power, min_effect, attacks,
                                 available_lists(data, list(fold), split, norm, list(seed)))
    spec = spec_from_options(algo=algo, data=data, fold=fold, train_rounds=train_rounds, clients=clients,
                             queries_per_client=queries_per_client, attack=attack, defense=defense,
                             click_model=click_model, split=split, seed=seed, probe_cohort=probe_cohort,
                             probe_queries=probe_queries, normalization=normalization, ranker=ranker,
                             min_shown=min_shown, require_click=require_click, epsilon_audit=epsilon_audit,
                             trials=trials, counterfactual=counterfactual, population=population,
                             threat_model=threat_model, manipulation=manipulation, non_iid=non_iid,
                             probe_lists=probe_lists, poison=list(poison))
    tables = run_spec(spec, store, quiet or json_out)
    table = attack_table(tables)
    v = verdicts(tables, min_effect=min_effect)
    audits = tables.get("audits", pd.DataFrame())
    audits = audits.drop(columns=[c for c in ("verdict",) if c in audits.columns])  # superseded by claim_verdict
    utility = tables.get("utility", pd.DataFrame())
    cost = manipulation_table(tables)
    if json_out:
        from reports.leakage import roc_rows

        emit_json({"attacks": table.to_dict(orient="records"),
                   "roc": roc_rows(tables.get("attacks")).to_dict(orient="records"),
                   "verdicts": v.to_dict(orient="records"),
                   "manipulation": cost.to_dict(orient="records"),
                   "audits": audits.to_dict(orient="records"),
                   "utility": utility.to_dict(orient="records"),
                   "zero_division": "0 (precision of a list with no positive guess, recall of a list without clicks)"})
        return
    _print_attacks(table)
    print_verdicts(v, min_effect)
    if len(cost):
        print_table("server-malicious: what the manipulation costs the other members (mean nDCG@10 of their "
                    "shown lists in the probed round)",
                    [{"clicks": r.click_model, "defense": r.defense, "manipulation": r.manipulation,
                      "honest": float(r.others_ndcg_honest), "served": float(r.others_ndcg_served),
                      "cost": float(r.others_ndcg_cost)} for r in cost.itertuples()])
    if len(utility):
        keys = ["defense"] + (["poison"] if "poison" in utility.columns else [])
        mean = utility.assign(**({"poison": utility["poison"].fillna("none")} if "poison" in utility else {})) \
            .groupby(keys, sort=False)[["ndcg10", "ndcg10_delta"]].mean().reset_index()
        print_table("Utility: offline nDCG@10 on test (queries without relevant documents left out)",
                    [{**{k: getattr(r, k) for k in keys}, "nDCG@10": float(r.ndcg10), "ΔnDCG@10": float(r.ndcg10_delta)}
                     for r in mean.itertuples()])
