"""FPDGD as a Flower ServerApp + ClientApp whose client step is the engine's own.

The engine draws a round's randomness for the whole cohort at once (DESIGN.md, Randomness):
``stream(seed, "queries", r)`` for the queries, ``stream(seed, "client", r)`` for the rankings
and clicks. A ClientApp of partition ``i`` therefore runs the engine's cohort step
(``FPDGD.client_step`` with the engine's streams, BLAS single-threaded as in ``train``) and sends
row ``i``: the same arithmetic and seeds give the same local weights as ``fltr-audit train
fpdgd``. A per-process cache keyed by the round and the served model computes that step once
per process and round, however many clients the process serves. The server is Flower's own
``FedAvg`` (``num-examples`` = B, so the n_c-weighted mean of Alg. 2, computed as the engine does:
``EngineFedAvg``), possibly wrapped by
Flower's DP wrappers and by ``RecordingStrategy``; offline nDCG@10 is evaluated by the server
after each round as the engine does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Strategy
from threadpoolctl import threadpool_limits

from fltr_audit.aggregation import weighted_mean
from fltr_audit.algorithms import registry as algorithms
from fltr_audit.errors import FltrError
from fltr_audit.federation import offline_ndcg, sample_queries
from fltr_audit.flower.convert import SHOWN, TRUTH, flat, model_record, pack
from fltr_audit.interfaces import ClientOutput
from fltr_audit.randomness import stream


@dataclass(frozen=True)
class FpdgdSetup:
    """One FPDGD federation, as ``fltr-audit train fpdgd`` takes it."""

    data: str
    fold: int = 1
    click_model: str = "perfect"
    clients: int = 10
    queries_per_client: int = 4
    rounds: int = 20
    lr: float = 0.1
    seed: int = 0
    ranker: str = "linear"
    eval_split: str = "test"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "FpdgdSetup":
        return cls(**json.loads(text))


_LOADED: dict[str, tuple[Any, Any]] = {}
_COHORT: dict[tuple, ClientOutput] = {}


def loaded(setup: FpdgdSetup) -> tuple[Any, Any]:
    """(splits, algorithm) of ``setup``, loaded once per process as ``train fpdgd`` loads them."""
    key = setup.to_json()
    if key not in _LOADED:
        from fltr_audit.data.load import load_splits

        normalization = algorithms.algorithm_spec("fpdgd").default_normalization
        # single-threaded BLAS, as in Ray's workers (OMP_NUM_THREADS=1): the synthetic data sets come out
        # different in the last float32 bits with more BLAS threads (seen: 4e-6)
        with threadpool_limits(limits=1):
            splits = load_splits(setup.data, setup.fold, normalization=normalization)
        alg = algorithms.build("fpdgd", splits, setup.click_model,
                               {"ranker": setup.ranker, "seed": setup.seed, "params": {"lr": setup.lr}})
        _LOADED[key] = (splits, alg)
    return _LOADED[key]


def round_queries(setup: FpdgdSetup, n_queries: int, round_: int) -> np.ndarray:
    """The cohort's queries of a round, as ``federation.train`` samples them."""
    replace = setup.clients * setup.queries_per_client > n_queries
    return sample_queries(n_queries, setup.clients, setup.queries_per_client, stream(setup.seed, "queries", round_),
                          replace)


def cohort_step(setup: FpdgdSetup, round_: int, params: np.ndarray) -> tuple[np.ndarray, ClientOutput]:
    """The engine's client step of the whole cohort in round ``round_`` from the served ``params``
    (``federation.run_round``'s call), cached per process: (queries, output)."""
    splits, alg = loaded(setup)
    key = (setup.to_json(), round_, hashlib.sha256(np.ascontiguousarray(params, dtype=np.float64)).hexdigest())
    if key not in _COHORT:
        queries = round_queries(setup, splits.train.n_queries, round_)
        with threadpool_limits(limits=1, user_api="blas"):
            out = alg.client_step(np.asarray(params, dtype=np.float64), splits.train, queries,
                                  np.arange(setup.clients, dtype=np.int64), stream(setup.seed, "client", round_),
                                  stream(setup.seed, "public", round_), False)
        _COHORT.clear()  # one round at a time per process
        _COHORT[key] = out
    return _COHORT[key].interactions.queries, _COHORT[key]


def make_client_app(setup: FpdgdSetup, mods: Sequence[Callable] = ()) -> ClientApp:
    """The FPDGD ClientApp: partition ``i`` (``node_config["partition-id"]``) sends the engine's
    local weights of client ``i``; the shown lists go along (``fltr.shown``), the clicks stay in
    ``context.state`` (``fltr.truth``) for a recording mod's truth file."""
    app = ClientApp(mods=list(mods))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        client = int(context.node_config.get("partition-id", -1))
        if not 0 <= client < setup.clients:
            raise FltrError(f"node_config partition-id: {client} is not a client of 0..{setup.clients - 1}")
        round_ = int(msg.content["config"]["server-round"])
        params = flat(msg.content["arrays"])
        queries, out = cohort_step(setup, round_, params)
        row = slice(client, client + 1)
        context.state[TRUTH] = pack(clicks=out.clicks[row])
        content = RecordDict({
            "arrays": model_record(out.messages.vector[client]),
            "metrics": MetricRecord({"num-examples": int(out.messages.n_interactions[client])}),
            SHOWN: pack(queries=queries[row], shown=out.interactions.shown[row]),
        })
        content[SHOWN]["client"] = client
        return Message(content=content, reply_to=msg)

    return app


class EngineFedAvg(FedAvg):
    """Flower's FedAvg whose mean is the engine's ``weighted_mean`` (``w @ X / sum w``) over the
    replies in client order. Flower's own sums ``w_c / W * x_c`` in arrival order: the same mean up
    to rounding (1e-16), which is enough to flip OLSR's near-zero coefficients in a later round; with
    this one the Flower run is bit-identical to the engine's."""

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, _ = self._check_and_log_replies(replies, is_train=True)
        if not valid:
            return None, None
        valid.sort(key=lambda m: int(m.content[SHOWN]["client"]) if SHOWN in m.content else m.metadata.src_node_id)
        vectors = np.stack([flat(m.content["arrays"]) for m in valid])
        weights = np.array([float(m.content["metrics"][self.weighted_by_key]) for m in valid])
        return model_record(weighted_mean(vectors, weights)), MetricRecord({})


def default_strategy(setup: FpdgdSetup) -> FedAvg:
    """FedAvg (the engine's arithmetic, ``EngineFedAvg``) over the whole cohort every round, no
    client-side evaluation."""
    return EngineFedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=setup.clients,
                        min_available_nodes=setup.clients, weighted_by_key="num-examples")


def make_server_app(setup: FpdgdSetup, strategy: Callable[[FpdgdSetup], Strategy] = default_strategy,
                    curves: list | None = None, curves_file: str | None = None) -> ServerApp:
    """The FPDGD ServerApp: ``strategy(setup)`` (Flower's FedAvg by default) from the engine's
    initial model for ``setup.rounds`` rounds; offline nDCG@10 after each round is appended to
    ``curves`` as ``(round, ndcg)`` and, as a line ``round,ndcg``, to ``curves_file`` (a deployment's
    ServerApp runs in a process of the SuperLink's)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        splits, alg = loaded(setup)
        eval_data = getattr(splits, setup.eval_split)

        def evaluate(round_: int, arrays: ArrayRecord) -> MetricRecord:
            ndcg = offline_ndcg(alg.ranker, flat(arrays), eval_data) if round_ > 0 else float("nan")
            if curves is not None and round_ > 0:
                curves.append((round_, ndcg))
            if curves_file is not None and round_ > 0:
                with open(curves_file, "a") as fh:
                    fh.write(f"{round_},{ndcg!r}\n")
            return MetricRecord({"offline_ndcg10": ndcg})

        init = alg.init_params(stream(setup.seed, "init"))
        strategy(setup).start(grid=grid, initial_arrays=model_record(init), num_rounds=setup.rounds,
                              train_config=ConfigRecord({}), evaluate_fn=evaluate)

    return app


def recording_mod(setup: FpdgdSetup, folder: str, rounds: set[int] | None = None, defense: str = "none"):
    """A ``RecordingMod`` that knows this federation's ranker and documents (the training split)."""
    from fltr_audit.flower.recording_mod import RecordingMod

    return RecordingMod(folder, rounds=rounds, algorithm="fpdgd", defense=defense,
                        ranker=loaded(setup)[1].ranker, documents=lambda: loaded(setup)[0].train)


def recording_strategy(setup: FpdgdSetup, strategy: Strategy, folder: str, *, sees: str = "messages",
                       rounds: set[int] | None = None, defense: str = "none"):
    """A ``RecordingStrategy`` around ``strategy`` with this federation's ranker, documents and --
    for scoring only -- its ground truth (the engine's clicks of the served model's round)."""
    from fltr_audit.flower.recording_strategy import RecordingStrategy

    def truth(round_: int, served: np.ndarray, participants: np.ndarray) -> np.ndarray:
        return cohort_step(setup, round_, served)[1].clicks[participants]

    return RecordingStrategy(strategy, folder, sees=sees, rounds=rounds, algorithm="fpdgd", defense=defense,
                             ranker=loaded(setup)[1].ranker, documents=lambda: loaded(setup)[0].train, truth=truth)


def simulate(setup: FpdgdSetup, *, strategy: Callable[[FpdgdSetup], Strategy] = default_strategy,
             mods: Sequence[Callable] = (), cpus: int = 2) -> list[tuple[int, float]]:
    """Run the federation on Flower's simulation runtime (Ray) with one SuperNode per client;
    the offline nDCG@10 curve ``[(round, ndcg), ...]``. FltrError when a client replied with an error."""
    from flwr.simulation import run_simulation

    curves: list[tuple[int, float]] = []
    built: list[Strategy] = []

    def keep(s: FpdgdSetup) -> Strategy:
        built.append(strategy(s))
        return built[-1]

    run_simulation(make_server_app(setup, keep, curves), make_client_app(setup, mods), num_supernodes=setup.clients,
                   backend_config={"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": cpus}})
    errors = [e for s in built for e in getattr(s, "errors", [])]
    if errors:
        raise FltrError(f"Flower run: {len(errors)} client replies were errors, first: {errors[0]}")
    if len(curves) != setup.rounds:
        raise FltrError(f"Flower run: finished {len(curves)} of {setup.rounds} rounds (see Flower's log above)")
    return curves
