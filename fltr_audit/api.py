"""The Python API: audits and campaigns from a notebook or a script, and plug-ins.

>>> import fltr_audit
>>> result = fltr_audit.audit(data="synthetic:mq2008", train_rounds=5, attacks=["olsr"],
...                           defenses=["none"], click_models=["perfect"], seeds=[0])
>>> result.attacks            # doctest: +SKIP
>>> result.report("audit-report")  # doctest: +SKIP

``audit`` takes the ``fltr-audit audit`` command's options as keywords, named as the options
(``--train-rounds`` -> ``train_rounds``; the repeatable or comma-separated ones in the plural:
``attacks``, ``defenses``, ``click_models``, ``seeds``, ``folds``) with the command's defaults,
read from the command itself so there is one place for them. It builds its runs through the
same code as the command, so the same arguments and seed give the same numbers.

Part of the composition root: it may import ``attacks``, ``defenses`` and ``reports``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from fltr_audit.engine.algorithms.registry import AlgorithmSpec
from fltr_audit.engine.algorithms.registry import register_algorithm as _register_algorithm
from fltr_audit.constraints import ParameterError
from fltr_audit.errors import FltrError

PLURAL = {"attacks": "attack", "defenses": "defense", "click_models": "click_model", "seeds": "seed",
          "folds": "fold"}
"""API keyword -> ``audit`` command parameter, where they differ."""
COMMA_SEPARATED = ("attack", "click_model")
"""Command parameters written as one comma-separated string; the API takes a list (or that string)."""
_CLI_ONLY = ("json_out", "quiet")


def audit_defaults() -> dict[str, Any]:
    """Every keyword of :func:`audit` with its default: the ``audit`` command's own defaults
    (comma-separated options as lists; ``attacks=None`` is the algorithm's set)."""
    from fltr_audit.cli.audit import audit as command

    api_name = {v: k for k, v in PLURAL.items()}
    defaults = {}
    for name, param in inspect.signature(command).parameters.items():
        if name in _CLI_ONLY:
            continue
        default = getattr(param.default, "default", param.default)
        if name == "trials":  # a number, or "auto" (sized to each defense's claim)
            default = int(default)
        if name in COMMA_SEPARATED and isinstance(default, str):
            default = [v for v in default.split(",") if v] or None
        defaults[api_name.get(name, name)] = default
    return defaults


def api_names() -> dict[str, str]:
    """The API's one map from a parameter as the engine names it (the run spec's ``probe.cohort``,
    an engine keyword's ``click_model``) to :func:`audit`'s keyword: what a Python caller typed."""
    from fltr_audit.cli.common import SPEC_PARAMETERS

    keyword = {v: k for k, v in PLURAL.items()}
    return {**keyword, **{spec: keyword.get(name, name) for spec, name in SPEC_PARAMETERS.items()}}


@dataclass(frozen=True)
class AuditResult:
    """The result of :func:`audit` or :func:`campaign`: its inputs and the result tables.

    Attributes
    ----------
    inputs : mapping
        The keywords as resolved, defaults included (for ``campaign``: the validated spec).
    spec : mapping
        The campaign spec the runs were expanded from (``fltr_audit.runs.campaign``).
    tables : mapping of str to DataFrame
        Every table of the runs (``docs/store.md``): ``attacks``, ``per_query``, ``utility``,
        ``curves``, ``audits``, ``epsilon``.
    """

    inputs: Mapping[str, Any]
    spec: Mapping[str, Any]
    tables: Mapping[str, pd.DataFrame] = field(repr=False)

    def _table(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())

    @property
    def attacks(self) -> pd.DataFrame:
        """One row per attack x click model x defense x threat model: what ``audit --json``
        prints under ``attacks`` (macro averages over the probed lists)."""
        from fltr_audit.cli.audit import attack_table

        return attack_table(self.tables) if "attacks" in self.tables else pd.DataFrame()

    @property
    def utility(self) -> pd.DataFrame:
        """Final offline nDCG of each defended model and its change against no defense."""
        return self._table("utility")

    @property
    def audits(self) -> pd.DataFrame:
        """The empirical epsilon audits of the defenses' claims."""
        return self._table("audits")

    @property
    def verdicts(self) -> pd.DataFrame:
        """Per defense and context: the leakage verdict (against the counterfactual baseline) and
        the claim verdict (from the epsilon audits), as ``reports.compare.verdicts``."""
        from reports.compare import verdicts

        if "attacks" not in self.tables:
            return pd.DataFrame()
        return verdicts(dict(self.tables), min_effect=self._min_effect())

    @property
    def roc(self) -> pd.DataFrame:
        """ROC points per attack x click model x defense: the runs' ``roc`` table (FPR, TPR per
        curve, real and counterfactual clicks) where they stored one; else the per-run pooled ROC
        curves stored with the attack rows (TPR at 61 log-spaced FPRs from 0.1 % to 100 %,
        ``reports.leakage.roc_rows``; what ``audit --json`` prints under ``roc``); else the TPR at
        FPR 0.1 % and 1 % of the attack rows (``curve`` "real")."""
        from reports.leakage import roc_rows

        if not self._table("roc").empty:
            return self._table("roc")
        stored = roc_rows(self.tables.get("attacks"))
        if not stored.empty:
            return stored
        attacks = self.attacks
        points = [(0.001, "tpr_at_fpr_0_001"), (0.01, "tpr_at_fpr_0_01")]
        if attacks.empty or not any(col in attacks for _, col in points):
            return pd.DataFrame(columns=["attack", "click_model", "defense", "curve", "fpr", "tpr"])
        keys = ["attack", "click_model", "defense"]
        return pd.concat([attacks[keys].assign(curve="real", fpr=fpr, tpr=attacks[col])
                          for fpr, col in points if col in attacks], ignore_index=True)

    def summary(self, file: Any = None) -> str:
        """The two verdicts per defense -- leakage verdict and claim verdict, nDCG beside them --
        as the ``audit`` command prints them; printed (to ``file``, default stdout) and returned."""
        import io
        import sys

        from rich.console import Console

        from fltr_audit.cli import verdict_tables

        buffer = io.StringIO()
        verdicts = self.verdicts
        if verdicts.empty:
            text = "no verdicts: the runs have no attack rows"
        else:
            verdict_tables.print_verdicts(verdicts, self._min_effect(),
                                          console=Console(file=buffer, width=verdict_tables.WIDTH))
            text = buffer.getvalue().rstrip("\n")
        print(text, file=file or sys.stdout)
        return text

    def _min_effect(self) -> float:
        from reports.compare import MIN_EFFECT

        value = self.inputs.get("min_effect") if isinstance(self.inputs, Mapping) else None
        return MIN_EFFECT if value is None else float(value)

    def report(self, path: str | Path, title: str = "fltr-audit privacy audit") -> Path:
        """Write the audit report (HTML, Markdown, plots, CSVs) into the folder ``path``
        (atomically, file by file); return the HTML file."""
        from fltr_audit.atomic import write_files
        from reports.render import render_report

        files = render_report(dict(self.tables), title=title, min_effect=self._min_effect(),
                              methods={"api": f"fltr_audit.audit({_call_text(self.inputs)})"})
        write_files(Path(path), files)
        return Path(path) / "report.html"


def _call_text(inputs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in inputs.items() if v is not None)


def _as_list(key: str, value: Any, item: type) -> list:
    values = [value] if isinstance(value, (str, int)) and not isinstance(value, bool) else value
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise FltrError(f"fltr_audit.audit: {key} must be a list of {item.__name__}, not {type(value).__name__}")
    items = []
    for v in values:
        if item is str and isinstance(v, str) and "," in v and key != "defenses":
            items += [p.strip() for p in v.split(",") if p.strip()]
            continue
        if not isinstance(v, item) or isinstance(v, bool):
            raise FltrError(f"fltr_audit.audit: {key} holds {v!r}, expected {item.__name__} items")
        items.append(v)
    if not items:
        raise FltrError(f"fltr_audit.audit: {key} is empty")
    return items


def _check(options: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Keyword names and types checked up front (scikit-learn style); values by the command's checks."""
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise FltrError(f"fltr_audit.audit: unknown keyword {unknown[0]!r} (known: {', '.join(sorted(defaults))})")
    resolved = {**defaults, **options}
    for key, value in resolved.items():
        default = defaults[key]
        if key in PLURAL:
            item = int if key in ("seeds", "folds") else str
            if value is not None:
                resolved[key] = _as_list(key, value, item)
        elif value is None:
            continue
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise FltrError(f"fltr_audit.audit: {key} must be True or False, not {value!r}")
        elif isinstance(default, int):
            if key == "trials" and value == "auto":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise FltrError(f"fltr_audit.audit: {key} must be an int, not {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise FltrError(f"fltr_audit.audit: {key} must be a str, not {value!r}")
    return resolved


def audit(**options: Any) -> AuditResult:
    """Audit a federated ranker: train, probe under each defense, attack, score, audit claims.

    Keywords (each optional; defaults as ``fltr-audit audit``; ``audit_defaults()`` lists them):
    ``data`` (path or ``synthetic:PROFILE``), ``algo`` (``fltr-audit algorithms list``),
    ``defenses`` (defense stacks, ``fltr-audit defenses list``), ``attacks`` (``fltr-audit
    attacks list``; None: the algorithm's set), ``click_models`` (None: the algorithm's
    family), ``seeds``, ``folds``, ``train_rounds``, ``clients``, ``queries_per_client``,
    ``split``, ``probe_cohort``, ``probe_queries``, ``normalization``, ``ranker``, ``min_shown``,
    ``require_click``, ``epsilon_audit``, ``trials``, ``store`` (also record the runs in this
    SQLite store).

    Returns
    -------
    AuditResult
        With the tables ``attacks``, ``utility``, ``audits``, ``verdicts`` and ``.report(path)``.

    Raises
    ------
    FltrError
        One line naming the keyword, before anything runs, for an unknown keyword, a value
        of the wrong type or an unknown name (algorithm, attack, defense, click model).
    """
    from fltr_audit.cli.audit import spec_from_options

    resolved = _check(options, audit_defaults())
    command = {PLURAL.get(k, k): v for k, v in resolved.items()}
    for name in COMMA_SEPARATED:
        command[name] = ",".join(command[name]) if command[name] else ""
    if command.get("click_model") == "":
        from fltr_audit.cli.audit import DEFAULT_CLICK_MODELS

        command["click_model"] = DEFAULT_CLICK_MODELS  # the algorithm's family
    store = command.pop("store", None)
    min_effect = command.pop("min_effect", None)  # a verdict option, not part of the runs
    power = command.pop("power", None)            # plans probe_lists, not part of the runs
    try:
        if command.get("probe_lists") is not None or power is not None:
            command["probe_lists"] = _probe_lists(command, power, min_effect)
        spec = spec_from_options(**command)
    except ParameterError as exc:  # named as the engine calls it: say the keyword typed
        raise (exc if exc.door else exc.renamed(api_names())) from None
    return AuditResult(inputs=resolved, spec=spec, tables=_run(spec, store))


def _probe_lists(command: dict, power: float | None, min_effect: float | None) -> int | None:
    """``probe_lists`` as given or planned from ``power`` and ``min_effect``, checked as the
    ``audit`` command checks ``--probe-lists`` and ``--power``."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec
    from fltr_audit.cli.audit import algorithm_defaults, available_lists, probe_size
    from reports.compare import MIN_EFFECT

    attacks, _, _ = algorithm_defaults(command["algo"], command["attack"], command["click_model"],
                                       command.get("min_shown"))
    norm = command["normalization"]
    norm = algorithm_spec(command["algo"], auditable=True).default_normalization if norm == "auto" else norm
    available = available_lists(command["data"], list(command["fold"]), command["split"], norm, list(command["seed"]))
    return probe_size(command.get("probe_lists"), power, MIN_EFFECT if min_effect is None else float(min_effect),
                      attacks, available)


def audit_campaign(path_or_dict: str | Path | Mapping[str, Any], store: str | Path | None = None) -> AuditResult:
    """Run a campaign (a TOML file, or the same tables as a dict; see ``fltr_audit.runs.campaign``).

    Without ``store`` the runs are computed in this process and kept in memory; with a store
    path they are recorded there (completed runs are reused) and read back. Plug-ins
    registered in this process are available (the runs do not leave it).
    """
    from fltr_audit.runs.campaign import load_spec, validate_spec

    if isinstance(path_or_dict, Mapping):
        spec = validate_spec(dict(path_or_dict), source="campaign")
    elif isinstance(path_or_dict, (str, Path)):
        spec = load_spec(path_or_dict)
    else:
        raise FltrError(f"fltr_audit.audit_campaign: expected a TOML path or a dict, not {type(path_or_dict).__name__}")
    return AuditResult(inputs=spec, spec=spec, tables=_run(spec, store))


def _run(spec: dict, store: str | Path | None) -> dict[str, pd.DataFrame]:
    """The concatenated tables of every run of ``spec`` (as the ``audit`` command computes them)."""
    import typer

    from fltr_audit.cli.audit import run_spec

    try:
        return run_spec(spec, None if store is None else Path(store), quiet=True)
    except typer.Exit:
        raise FltrError(f"campaign {spec['name']!r}: a run failed; `fltr-audit campaign status --store {store}` "
                        "shows its error") from None


def register_attack(name: str, factory: Callable[..., Any], reference: bool = False,
                    needs: tuple[str, ...] = ()) -> None:
    """Add an attack: ``factory(**params)`` returns an object with ``name`` and
    ``guess(view: ServerView) -> Guess`` (a score per shown slot, higher = more likely clicked).

    ``needs`` names what the audit passes the factory, from ``seed``, ``algorithm``, ``k`` and
    ``noise``; ``reference=True`` marks a baseline that does not read the message. The
    attack is then usable by name everywhere in this process (``audit``, campaigns run here).
    Give every keyword of the factory a default: a campaign builds each attack once without
    arguments to check the names before any run.
    """
    from attacks.registry import register_attack as register

    register(name, factory, reference=reference, needs=tuple(needs))


def register_defense(name: str, factory: Callable[..., Any], role: str = "client", *, guarantee: str = "",
                     summary: str = "") -> None:
    """Add a defense usable in defense strings (``name(key=value)+...``).

    ``factory(**params)`` returns a client defense (``apply(messages, global_params, rng) ->
    Messages``) or, with ``role="aggregator"``, an aggregator (``aggregate(messages,
    participants, rng) -> Aggregate``), carrying the ``claim`` (``PrivacyClaim``) it makes;
    ``guarantee`` states it in words for ``defenses list``. A client defense that transforms
    FOLtR-ES metric values declares ``privatizes = "metric"``. A defense declares what it does in
    its ``mechanism`` attribute (``fltr_audit.privacy.mechanisms``: ``Laplace``, ``Gaussian``,
    ``RandomizedResponse``, ...): the worst-case audit, the mechanism-aware test and the Bayes
    likelihood read it; one that declares nothing is audited with the learned test.
    """
    from defenses.registration import register_defense as register

    register(name, factory, role, guarantee=guarantee, summary=summary)


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Add an algorithm (``fltr_audit.engine.algorithms.registry.AlgorithmSpec``)."""
    _register_algorithm(spec)


def audit_whole_run(algorithm: str, **options: Any) -> Any:
    """The privacy a user spends over a whole run, audited with canaries (``fltr-audit audit-run``):
    keywords as ``fltr_audit.runs.whole_run.RunAuditOptions`` (``defense``, ``canaries``,
    ``runs``, ``data``, ``rounds``, ``clients``, ``population``, ``seed``, ...); returns the
    ``fltr_audit.store.records.RunAuditRecord``."""
    from dataclasses import fields

    from fltr_audit.runs.whole_run import RunAuditOptions, run_audit_run

    known = {f.name for f in fields(RunAuditOptions)} - {"algorithm"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise FltrError(f"audit_whole_run: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return run_audit_run(RunAuditOptions(algorithm=algorithm, **options))


def accountant(defense: str, *, rounds: int, clients: int, population: int | None = None, seed: int = 0,
               queries_per_client: int = 4) -> Any:
    """The accountant of ``defense`` over the participation schedule of a run (``defenses.accounting.
    RunAccountant``): ``get_epsilon(delta, scope="server" | "observer", quantile=None)``, ``spent()``;
    a per-value claim (FOLtR-ES's ``rr``) is charged ``queries_per_client`` values per participation."""
    from defenses.accounting import ParticipationSchedule, RunAccountant
    from defenses.stack import parse_defense

    return RunAccountant(parse_defense(defense), ParticipationSchedule.of_run(seed, rounds, clients, population),
                         queries_per_client)


__all__ = ["AlgorithmSpec", "AuditResult", "accountant", "audit", "audit_campaign", "audit_defaults",
           "audit_whole_run", "register_algorithm", "register_attack", "register_defense"]
