"""The algorithms by name, each with the capabilities the rest of the testbed asks about.

One ``AlgorithmSpec`` per algorithm declares how to build it for a run and what an audit of
it needs: the click-model family its users follow, the feature normalization and attacks an
audit uses by default, the kind of message a client sends and what that message reveals. The
CLI (``train``, ``audit``, ``algorithms list``), campaigns and the audit run look algorithms up
here instead of branching on their names; ``register_algorithm`` (also through the
``fltr_audit.engine.algorithms`` entry-point group) adds one.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from fltr_audit import plugins
from fltr_audit.constraints import InstanceOf, Interval, Options, Parameter, ParameterError, validate
from fltr_audit.errors import FltrError
from fltr_audit.engine import unlearning as unlearning_methods

if TYPE_CHECKING:  # start-up: the command line lists the algorithms before numpy loads
    from fltr_audit.engine.interfaces import Algorithm
    from fltr_audit.engine.messages import MessageKind

ClickFamily = Literal["cascade", "pbm"]
CASCADE_CLICK_MODELS = ("perfect", "navigational", "informational")

Builder = Callable[[Any, str, dict], "Algorithm"]
"""``build(splits, click_model, settings) -> Algorithm``; ``settings`` holds ``ranker``,
``seed``, ``clients``, ``queries_per_client`` and ``params`` (the algorithm's own keywords)."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm and what it declares.

    Attributes
    ----------
    name : str
    build : callable or None
        ``build(splits, click_model, settings)``; None for train-only entries that have their
        own ``train`` command and no federated message to audit.
    click_models : {"cascade", "pbm"}
        The family of its users' click model: cascade (perfect / navigational / informational,
        FPDGD and FOLtR-ES) or the position-based model with per-user bias (FedIPS Eq. 11).
    default_normalization : str
        Feature normalization of its paper's setup (``audit --normalization auto``).
    default_attacks : tuple of str
        The attacks an audit runs when none are named.
    message_kind : {"weights", "update", "seed+metric", "none"}
        What a client sends: full local weights, an update, a public seed and metric values, or
        nothing (centralized and supervised baselines).
    reveals : str
        What that message reveals about the user, in plain words.
    train_click_model : str
        Click model of the pre-training an audit runs.
    k : int
        Length of the shown lists; an audit scores only full lists by default.
    auditable : bool
        False for train-only entries (``audit`` and campaigns refuse them).
    summary : str
    params : tuple of Parameter or None
        The algorithm's own keywords (``algorithm.params`` of a campaign, ``--lr`` of ``train``)
        with their defaults and constraints (``fltr_audit.constraints``); a key not declared is
        an error at the door. None: undeclared (any key passes to the builder unchecked).
    distribution : str
        The installed distribution that registered it (a plug-in), empty for built-ins.
    server_manipulable : bool
        A ``server-malicious`` probe can isolate a target in its rounds (vector messages of
        PDGD steps; ``fltr_audit.engine.malicious``).
    user_clicks : bool
        Whether it simulates each user's own clicks (``--non-iid document-preference`` and
        ``click-preference``, :mod:`fltr_audit.engine.population`).
    unlearning : tuple of str
        The unlearning methods it supports (``fltr_audit.engine.unlearning.METHODS``): ``federaser``
        needs a server step linear in the cohort's mean update, ``pga`` an algorithm whose
        ``ascending()`` copy steps against its clients' gradient (``fltr-audit audit-unlearning``).
    """

    name: str
    build: Builder | None
    click_models: ClickFamily
    default_normalization: str
    default_attacks: tuple[str, ...]
    message_kind: MessageKind
    reveals: str
    train_click_model: str
    k: int = 10
    auditable: bool = True
    summary: str = ""
    params: tuple[Parameter, ...] | None = None
    distribution: str = ""
    server_manipulable: bool = False
    user_clicks: bool = False
    unlearning: tuple[str, ...] = ()

    def probe_click_models(self) -> tuple[str, ...]:
        """The click models an audit probes by default: every one of the family."""
        return CASCADE_CLICK_MODELS if self.click_models == "cascade" else ("pbm",)

    def check_click_model(self, click_model: str) -> None:
        """ParameterError naming ``click_model`` when it is not of this algorithm's family."""
        if self.click_models == "pbm" and click_model != "pbm":
            raise ParameterError("click_model", f"{self.name}'s users click by the position-based model (FedIPS "
                                 f"Eq. 11); use click model 'pbm', not {click_model!r}")
        if self.click_models == "cascade" and click_model == "pbm":
            raise ParameterError("click_model", f"{self.name}'s users click by a cascade model; choose "
                                 f"{', '.join(CASCADE_CLICK_MODELS)}, not 'pbm'")


    def check_unlearning(self, method: str) -> None:
        """ParameterError naming ``method`` unless this algorithm supports that unlearning method."""
        if method not in self.unlearning:
            supported = ", ".join(self.unlearning) if self.unlearning else "none of them"
            raise ParameterError("method", f"{self.name} does not support unlearning method {method!r} "
                                           f"(it supports {supported})")

    def check_params(self, params: dict, prefix: str = "") -> None:
        """ParameterError naming ``PREFIX + key`` for a key this algorithm does not declare or a
        value outside its constraints (nothing is checked when ``params`` is None)."""
        if self.params is not None:
            validate(params, self.params, prefix)


def _cascade_builder(cls_path: str) -> Builder:
    """A builder of a cascade-click algorithm class ``module:Class`` taking (ranker, click model, **params)."""
    def build(splits: Any, click_model: str, settings: dict) -> Algorithm:
        # start-up: the listings load the registry before numpy
        from fltr_audit.engine.clicks import cascade_model
        from fltr_audit.engine.rankers import make_ranker

        module, _, cls = cls_path.partition(":")
        train = splits.train
        ranker = make_ranker(settings.get("ranker") or "linear", train.n_features)
        return getattr(importlib.import_module(module), cls)(ranker, cascade_model(click_model, train.n_levels),
                                                             **(settings.get("params") or {}))

    return build


def _fedips_builder(default_propensity: str | None) -> Builder:
    """FedIPS (``default_propensity`` "true", overridable by ``params.propensity``) or FedAvg (None)."""
    def build(splits: Any, click_model: str, settings: dict) -> Algorithm:
        # start-up: the listings load the registry before numpy
        from fltr_audit.engine.algorithms.fedips import build_fedips

        params = dict(settings.get("params") or {})
        propensity = params.pop("propensity", default_propensity) if default_propensity else "none"
        return build_fedips(splits, propensity=propensity, seed=settings.get("seed", 0),
                            clients=settings.get("clients", 2000),
                            queries_per_client=settings.get("queries_per_client", 5), **params)

    return build


_POSITIVE = (Interval(float, 0, None, closed="neither"),)
_LIST_LENGTH = Parameter("k", 10, (Interval(int, 1, None),), "length of the shown lists")
_PDGD_PARAMS = (Parameter("lr", 0.1, _POSITIVE, "PDGD learning rate eta"), _LIST_LENGTH)
_FOLTR_ES_PARAMS = (
    Parameter("sigma", 0.01, _POSITIVE, "ES perturbation scale"),
    Parameter("lr", 0.001, _POSITIVE, "Adam learning rate"),
    Parameter("antithetic", True, (InstanceOf(bool),), "antithetic perturbation pairs"),
    _LIST_LENGTH,
    Parameter("eps", 1e-8, _POSITIVE, "Adam epsilon"),
    Parameter("flawed_seeding", False, (InstanceOf(bool),), "the reference code's seeding flaw"),
)
_FEDAVG_PARAMS = (
    Parameter("gamma", 1.0, (Interval(float, 0, None),), "PBM position-bias exponent (FedIPS Eq. 11)"),
    Parameter("k", 5, (Interval(int, 1, None),), "length of the shown lists"),
    Parameter("clicks_per_client", 10, (Interval(int, 1, None),), "clicks a client collects per round"),
    Parameter("lr_local", 0.001, _POSITIVE, "local learning rate"),
    Parameter("lr_global", 1.0, _POSITIVE, "server learning rate"),
    Parameter("logging_fraction", 0.01, (Interval(float, 0, 1, closed="right"),),
              "share of training queries for the logging policy f_0"),
    Parameter("em_rounds", 20, (Interval(int, 1, None),), "EM rounds of the estimated propensities"),
)
_FEDIPS_PARAMS = (Parameter("propensity", "true", (Options(("true", "estimated", "none")),),
                            "true, estimated (federated EM) or none (FedAvg)"), *_FEDAVG_PARAMS)

_PHAM_ATTACKS = ("olsr", "olsr-l1", "score", "prob", "random3", "random4")
_VECTOR_ATTACKS = ("olsr", "score", "prob", "random3")
# ``distance`` is left out: its score is the within-list rank of ``score``'s (attacks/heuristics.py),
# so its per-list AUC and leakage are score's, and a verdict family would count one attack twice.

_ALL_UNLEARNING = unlearning_methods.METHODS

_REGISTRY: dict[str, AlgorithmSpec] = {}


def register_algorithm(spec: AlgorithmSpec, *, replace: bool = False) -> AlgorithmSpec:
    """Add ``spec`` to the registry (``replace`` to overwrite an entry of the same name)."""
    if not isinstance(spec, AlgorithmSpec):
        raise FltrError(f"register_algorithm: expected an AlgorithmSpec, got {type(spec).__name__}")
    if spec.name in _REGISTRY and not replace:
        raise FltrError(f"register_algorithm: algorithm {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


for _spec in (
    AlgorithmSpec("fpdgd", _cascade_builder("fltr_audit.engine.algorithms.fpdgd:FPDGD"), "cascade", "zscore", _PHAM_ATTACKS,
                  "weights", "the client's local weights after B PDGD steps: a linear combination of the "
                  "features of the shown documents, weighted by the clicks", "perfect",
                  summary="Federated PDGD (FPDGD Algorithm 2)", params=_PDGD_PARAMS, server_manipulable=True,
                  user_clicks=True, unlearning=_ALL_UNLEARNING),
    AlgorithmSpec("pdgd", _cascade_builder("fltr_audit.engine.algorithms.pdgd:PDGD"), "cascade", "zscore", (), "none",
                  "nothing: centralized, the server holds the clicks", "perfect", auditable=False,
                  summary="Centralized PDGD with batch-accumulated updates (FPDGD paper, baselines)",
                  params=_PDGD_PARAMS, user_clicks=True),
    AlgorithmSpec("foltr-es", _cascade_builder("fltr_audit.engine.algorithms.foltr_es:FOLtRES"), "cascade", "none",
                  ("foltr-decode", "random3"), "seed+metric",
                  "a public seed and one MaxRR value per interaction: the first-click position", "perfect",
                  summary="FOLtR-ES: evolution strategies with seed + MaxRR messages (Kharitonov 2019)",
                  params=_FOLTR_ES_PARAMS),
    AlgorithmSpec("fedips", _fedips_builder("true"), "pbm", "query-minmax", _VECTOR_ATTACKS, "update",
                  "the update w_local - w_global: IPS-weighted hinge gradients over the shown lists, "
                  "one per click", "pbm", k=5,
                  summary="FedIPS: IPS-weighted federated counterfactual LTR (Li & Ouyang, Algorithm 1)",
                  params=_FEDIPS_PARAMS, unlearning=_ALL_UNLEARNING),
    AlgorithmSpec("fedavg", _fedips_builder(None), "pbm", "query-minmax", _VECTOR_ATTACKS, "update",
                  "the update w_local - w_global: unweighted hinge gradients over the shown lists, one per click",
                  "pbm", k=5, summary="FedAvg baseline of FedIPS: all propensities 1", params=_FEDAVG_PARAMS,
                  unlearning=_ALL_UNLEARNING),
    AlgorithmSpec("lambda-linear", None, "pbm", "query-minmax", (), "none",
                  "nothing: centralized, trained on labels", "pbm", k=5, auditable=False,
                  summary="LambdaMART-style linear ranker on labels (FedIPS's upper bound); train only"),
    AlgorithmSpec("baselines", None, "cascade", "none", (), "none", "nothing: supervised on labels", "perfect",
                  auditable=False, summary="MSE and RankingSVM (FOLtR-ES §5); train only"),
):
    register_algorithm(_spec)


def _guarded_build(name: str, build: Builder) -> Builder:
    """A plug-in's builder behind the project's boundary (``plugins.call_plugin``)."""
    def guarded(splits: Any, click_model: str, settings: dict) -> Algorithm:
        return plugins.call_plugin(f"algorithm plug-in {name!r} failed in its builder", build, splits, click_model,
                                   settings)

    return guarded


def algorithm_spec(name: str, auditable: bool = False) -> AlgorithmSpec:
    """The spec called ``name``, from the registry or an installed plug-in.

    ParameterError naming ``algorithm.name`` and the choices for an unknown name (and, with
    ``auditable``, for a train-only one).
    """
    spec = _REGISTRY.get(name)
    if spec is None:
        loaded = plugins.load(plugins.ALGORITHMS, name)
        if loaded is not None:
            if callable(loaded) and not isinstance(loaded, AlgorithmSpec):
                loaded = plugins.call_plugin(f"algorithm plug-in {name!r} failed", loaded)
            if not isinstance(loaded, AlgorithmSpec):
                raise ParameterError("algorithm.name", f"{name}: algorithm plug-in {name!r} ({plugins.ALGORITHMS}) "
                                     f"gives a {type(loaded).__name__}, not an AlgorithmSpec")
            spec = register_algorithm(dataclasses.replace(
                loaded, distribution=loaded.distribution or plugins.installed(plugins.ALGORITHMS).get(name, ""),
                build=_guarded_build(name, loaded.build) if loaded.build is not None else None))
    choices = [s.name for s in _REGISTRY.values() if s.auditable or not auditable]
    if spec is None or spec.name not in choices:
        raise ParameterError("algorithm.name", f"unknown algorithm {name!r} (choose from {', '.join(choices)})")
    return spec


def manipulable_names() -> tuple[str, ...]:
    """The registered algorithms a ``server-malicious`` probe supports (``server_manipulable``)."""
    return tuple(s.name for s in _REGISTRY.values() if s.server_manipulable)


def algorithm_names(auditable: bool = False) -> tuple[str, ...]:
    """Every registered algorithm (only the auditable ones with ``auditable``)."""
    return tuple(s.name for s in _REGISTRY.values() if s.auditable or not auditable)


def algorithm_specs() -> tuple[AlgorithmSpec, ...]:
    """Every registered spec, built-ins first (installed plug-ins once looked up by name)."""
    return tuple(_REGISTRY.values())


def build(name: str, splits: Any, click_model: str, settings: dict) -> Algorithm:
    """The algorithm ``name`` for ``splits`` with users clicking by ``click_model``."""
    spec = algorithm_spec(name)
    if spec.build is None:
        raise ParameterError("algorithm.name", f"{name} is train-only (use `fltr-audit train {name}`)")
    spec.check_click_model(click_model)
    return spec.build(splits, click_model, settings)
