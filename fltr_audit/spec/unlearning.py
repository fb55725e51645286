"""What an unlearning audit is asked to do (``UnlearningOptions``; ``fltr-audit audit-unlearning``,
``fltr_audit.audit_unlearning``, a campaign's ``[unlearning]`` table), checked before anything is
loaded or trained (``check_unlearning``: one ParameterError naming the option)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.forgotten_poisoners import check_poisonable
from defenses.robust.compose import check_cohort
from fltr_audit.constraints import OPEN_UNIT, POSITIVE, Interval, Options, ParameterError, check
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.engine.messages import Messages
from fltr_audit.engine.unlearning import METHODS
from fltr_audit.errors import FltrError
from fltr_audit.spec.run import UNLEARNING_CANARIES as DEFAULT_CANARIES
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.spec.defense import DefenseSpec
from fltr_audit.spec.run import RunSpec

VECTOR_KINDS = ("weights", "update")
"""The message kinds canary clients can be crafted in."""


@dataclass(frozen=True)
class UnlearningOptions:
    """One unlearning audit: the ``method``; ``forget`` population users forgotten besides the
    included ones of ``canaries`` canaries (each included with probability 1/2); FedEraser's
    ``interval`` (rounds between kept updates) and ``calibration`` ratio (of the B queries); the
    ``unlearn_rounds`` of ``finetune`` and of each phase of ``pga`` (None: a tenth of the training
    rounds, at least 1); the canaries' step ``scale`` (times the round's median update norm); the
    ``poison_check`` (ECIR 2024: the forgotten users poison the run, their effect must go); the
    bounds' ``confidence``."""

    method: str = "federaser"
    forget: int = 0
    canaries: int = DEFAULT_CANARIES
    interval: int = 5
    calibration: float = 0.5
    unlearn_rounds: int | None = None
    scale: float = 10.0
    poison_check: bool = False
    confidence: float = 0.95

    def rounds_for(self, training_rounds: int) -> int:
        """The unlearning rounds of ``finetune`` and ``pga`` for a training of ``training_rounds``."""
        return self.unlearn_rounds if self.unlearn_rounds is not None else max(1, training_rounds // 10)

    @classmethod
    def of_run(cls, spec: RunSpec) -> "UnlearningOptions":
        """The options of a campaign run's ``[unlearning]`` table (its method, the grid axis)."""
        a = spec.audit
        return cls(method=a.unlearning, forget=a.unlearning_forget, canaries=a.unlearning_canaries,
                   poison_check=a.unlearning_poison_check)


def check_unlearning(spec: RunSpec, options: UnlearningOptions) -> None:
    """Bad input, before anything is loaded or trained: one ParameterError naming the option."""
    o, algo = options, spec.algorithm
    users = algo.population or algo.clients
    check("method", o.method, (Options(METHODS),))
    check("forget", o.forget, (Interval(int, 0, None),), "population users forgotten besides the canaries")
    check("canaries", o.canaries, (Interval(int, 0, None),))
    if o.forget > users:
        raise ParameterError("forget", f"forgetting {o.forget:,} clients: more than the population of {users:,} users")
    if o.canaries > users:
        raise ParameterError("canaries", f"{o.canaries:,} canaries: more than the population of {users:,} users "
                                         "they are drawn from")
    if o.forget + o.canaries == 0:
        raise ParameterError("canaries", "0 canaries and --forget 0: nothing to forget")
    if o.forget + o.canaries >= users:
        raise ParameterError("forget", f"{o.forget:,} clients to forget and {o.canaries:,} canaries leave none of "
                                       f"the {users:,} users to keep training")
    spec_of = algorithms.algorithm_spec(algo.name, auditable=True)
    spec_of.check_unlearning(o.method)
    if spec_of.message_kind not in VECTOR_KINDS:
        raise ParameterError("method", f"{algo.name} sends {spec_of.message_kind!r} messages; canary clients are "
                                       "crafted as parameter vectors")
    check("interval", o.interval, (Interval(int, 1, None),), "rounds between the updates FedEraser keeps")
    check("calibration", o.calibration, (Interval(float, 0, 1, "right"),), "FedEraser's share of the B queries")
    check("unlearn_rounds", o.unlearn_rounds, (Interval(int, 1, None), None))
    check("scale", o.scale, POSITIVE, "a canary's step in median update norms")
    check("confidence", o.confidence, OPEN_UNIT)
    if o.poison_check:
        check_poisonable(algo.name, spec_of.message_kind, spec_of.user_clicks)
    try:  # the training's cohorts, named as the campaigns' check (``campaign_checks``) names them
        check_cohort(spec.defense.build(), algo.clients)
    except FltrError as exc:
        raise ParameterError("defense", str(exc)) from None
    check_method_fits(o.method, spec.defense)


def check_method_fits(method: str, defense: DefenseSpec) -> None:
    """ParameterError naming ``method`` when FedEraser or PGA, which read each client's update linked
    to its sender, run under a defense that hides the updates (secure aggregation, a DP aggregator:
    its aggregator hands the server no messages) or unlinks them (a shuffler)."""
    if method not in ("federaser", "pga"):
        return
    stack = defense.build()
    probe = Messages(n_interactions=np.ones(2, dtype=np.int64), vector=np.zeros((2, 2)))
    extra = {"global_params": np.zeros(2)} if stack.aggregator.reads_global_model else {}
    shown = stack.aggregator.aggregate(probe, np.arange(2), np.random.default_rng(0), **extra).messages is not None
    if not shown or isinstance(mech.declared(stack.aggregator), mech.Shuffle):
        raise ParameterError("method", f"{method} needs each client's update, linked to its sender; defense "
                                       f"{stack.name!r} hides them (choose retrain, finetune or none)")
