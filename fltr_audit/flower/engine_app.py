"""FPDGD, FOLtR-ES and FedIPS as a Flower ServerApp + ClientApp whose client and server steps are
the engine's own.

The engine draws a round's randomness for the whole cohort at once (DESIGN.md, Randomness):
``stream(seed, "queries", r)`` for the queries, ``stream(seed, "client", r)`` for the rankings
and clicks, ``stream(seed, "public", r)`` for what the messages reveal (FOLtR-ES's seeds). A
ClientApp of partition ``i`` therefore runs the engine's cohort step (``algorithm.client_step``
with the engine's streams, BLAS single-threaded as in ``train``) and sends row ``i``: the same
arithmetic and seeds give the same messages as ``federation.train``. A per-process cache keyed by
the round and the served model computes that step once per process and round, however many
clients the process serves.

Each train message carries its federation (``EngineSetup`` as JSON in the config, ``fltr.setup``),
so one ClientApp serves any federation, and one ServerApp may run several federations one after
the other (one Flower run, one simulation start-up). What a client sends, by the algorithm's
message kind: the local weights (FPDGD) or the update (FedIPS) as one ``params`` array, or the
public seed and the B metric values (FOLtR-ES) as ``seed`` and ``metric`` arrays.

The server is Flower's ``FedAvg`` for sampling and configuration; its aggregation is the
engine's (``EngineFedAvg``): the n_c-weighted mean of the vectors, then the algorithm's own
server step (FPDGD: the mean; FedIPS: w + eta_g mean; FOLtR-ES: the ES gradient from the seeds
and metrics, then Adam). Offline nDCG@10 is evaluated by the server after each round as the
engine does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Strategy
from threadpoolctl import threadpool_limits

from fltr_audit.engine.aggregation import FedAvg as EngineAggregation
from fltr_audit.engine.algorithms import registry as algorithms
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.data.load import load_splits
from fltr_audit.errors import FltrError
from fltr_audit.engine.evaluation import offline_ndcg
from fltr_audit.engine.schedule import sample_queries
from fltr_audit.flower.quiet import QUIET_RAY_INIT, quiet_flower
from fltr_audit.flower.convert import CLIENT, SHOWN, TRUTH, flat, message_record, model_record, pack, reply_messages
from fltr_audit.engine.interfaces import ClientOutput
from fltr_audit.engine.messages import ServerView
from fltr_audit.engine.randomness import stream
from fltr_audit.flower.recording_mod import RecordingMod
from fltr_audit.flower.recording_strategy import RecordingStrategy

ALGORITHMS = ("fpdgd", "foltr-es", "fedips")
"""The algorithms whose client step runs on Flower."""
SETUP = "fltr.setup"
"""Train-message config key: the federation (``EngineSetup.to_json()``)."""


@dataclass(frozen=True)
class EngineSetup:
    """One federation, as ``fltr-audit train ALGO`` takes it; ``params`` the algorithm's own keywords
    (``(name, value)`` pairs, e.g. ``(("lr", 0.1),)``); ``replace`` draws the queries with
    replacement (also done when a round needs more queries than the split has)."""

    data: str
    algo: str = "fpdgd"
    fold: int = 1
    click_model: str = "perfect"
    clients: int = 10
    queries_per_client: int = 4
    rounds: int = 20
    params: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    ranker: str = "linear"
    eval_split: str = "test"
    replace: bool = False

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ParameterError("algo", f"{self.algo!r} does not run on Flower (choose {', '.join(ALGORITHMS)})")
        algorithms.algorithm_spec(self.algo).check_click_model(self.click_model)
        object.__setattr__(self, "params", tuple((str(k), v) for k, v in self.params))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "EngineSetup":
        return cls(**json.loads(text))


_LOADED: dict[str, tuple[Any, Any]] = {}
_COHORT: dict[tuple, ClientOutput] = {}


def loaded(setup: EngineSetup) -> tuple[Any, Any]:
    """(splits, algorithm) of ``setup``, loaded once per process as ``train`` loads them (the
    registry's builder and default normalization)."""
    key = setup.to_json()
    if key not in _LOADED:
        spec = algorithms.algorithm_spec(setup.algo)
        # single-threaded BLAS, as in Ray's workers (OMP_NUM_THREADS=1): the synthetic data sets come out
        # different in the last float32 bits with more BLAS threads (seen: 4e-6)
        with threadpool_limits(limits=1):
            splits = load_splits(setup.data, setup.fold, normalization=spec.default_normalization)
            alg = algorithms.build(setup.algo, splits, setup.click_model,
                                   {"ranker": setup.ranker, "seed": setup.seed, "clients": setup.clients,
                                    "queries_per_client": setup.queries_per_client, "params": dict(setup.params)})
        _LOADED[key] = (splits, alg)
    return _LOADED[key]


def round_queries(setup: EngineSetup, n_queries: int, round_: int) -> np.ndarray:
    """The cohort's queries of a round, as ``federation.train`` samples them."""
    replace = setup.replace or setup.clients * setup.queries_per_client > n_queries
    return sample_queries(n_queries, setup.clients, setup.queries_per_client, stream(setup.seed, "queries", round_),
                          replace)


def cohort_step(setup: EngineSetup, round_: int, params: np.ndarray) -> tuple[np.ndarray, ClientOutput]:
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


def client_of(msg: Message) -> int:
    """The partition a reply of ours came from (its ``fltr.shown["client"]``), else its node id."""
    shown = msg.content.config_records.get(SHOWN)
    return int(shown["client"]) if shown is not None and "client" in shown else int(msg.metadata.src_node_id)


def make_client_app(mods: Sequence[Callable] = ()) -> ClientApp:
    """The ClientApp of any ``EngineSetup`` (read from the message, ``fltr.setup``): a message for
    client ``i`` (its config's ``fltr.client``; without it, the node's ``partition-id``) gets the
    engine's message of client ``i``; the shown lists go along (``fltr.shown``), the clicks stay in
    ``context.state`` (``fltr.truth``) for a recording mod's truth file."""
    app = ClientApp(mods=list(mods))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        config = msg.content["config"]
        if SETUP not in config:
            raise FltrError(f"train message: no {SETUP} in its config (not sent by an fltr-audit ServerApp)")
        setup = EngineSetup.from_json(str(config[SETUP]))
        source = f"train message {CLIENT}" if CLIENT in config else "node_config partition-id"
        client = int(config[CLIENT]) if CLIENT in config else int(context.node_config.get("partition-id", -1))
        if not 0 <= client < setup.clients:
            raise FltrError(f"{source}: {client} is not a client of 0..{setup.clients - 1}")
        round_ = int(config["server-round"])
        queries, out = cohort_step(setup, round_, flat(msg.content["arrays"]))
        row = slice(client, client + 1)
        context.state[TRUTH] = pack(clicks=out.clicks[row])
        content = RecordDict({
            "arrays": message_record(out.messages, client),
            "metrics": MetricRecord({"num-examples": int(out.messages.n_interactions[client])}),
            SHOWN: pack(queries=queries[row], shown=out.interactions.shown[row]),
        })
        content[SHOWN]["client"] = client
        return Message(content=content, reply_to=msg)

    return app


class EngineFedAvg(FedAvg):
    """Flower's FedAvg (sampling, configuration, reply checks) whose aggregation is the engine's:
    the replies in client order, the engine's ``FedAvg`` (``w @ X / sum w``), then the algorithm's
    ``server_step`` from the model served this round (its optimizer state kept here). Flower's
    own mean sums ``w_c / W * x_c`` in arrival order: the same up to rounding (1e-16), which is
    enough to flip OLSR's near-zero coefficients in a later round; with this one the Flower run is
    bit-identical to the engine's.

    Each round sends one train message per client, carrying its client id (``fltr.client``), to
    the sampled SuperNodes in turn (client ``c`` to the ``c mod n``-th of the ``n`` nodes by node
    id): with as many SuperNodes as clients each serves one client; with fewer, each serves
    several clients' messages in the round, one after the other (a SuperNode fronting several
    users' devices)."""

    def __init__(self, setup: EngineSetup, **kwargs: Any):
        super().__init__(**kwargs)
        self.setup = setup
        self.state: Any = None
        self._served: np.ndarray | None = None

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._served = flat(arrays)
        sampled = list(super().configure_train(server_round, arrays, config, grid))  # sets "server-round"
        nodes = sorted(m.metadata.dst_node_id for m in sampled)
        if not nodes:
            return []
        return [Message(RecordDict({self.arrayrecord_key: arrays,
                                    self.configrecord_key: ConfigRecord({**dict(config), CLIENT: c})}),
                        dst_node_id=nodes[c % len(nodes)], message_type=MessageType.TRAIN)
                for c in range(self.setup.clients)]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, _ = self._check_and_log_replies(replies, is_train=True)
        if not valid:
            return None, None
        valid.sort(key=client_of)
        _, alg = loaded(self.setup)
        kind = algorithms.algorithm_spec(self.setup.algo).message_kind
        participants = np.array([client_of(m) for m in valid], dtype=np.int64)
        agg = EngineAggregation().aggregate(reply_messages([m.content for m in valid], kind), participants,
                                            stream(self.setup.seed, "aggregate", server_round))
        served = self._served if self._served is not None else np.zeros(0)
        if self.state is None:
            self.state = alg.init_server_state(served)
        view = ServerView(round=server_round, threat_model="server-blind", global_params=served, ranker=alg.ranker,
                          participants=participants, dropouts=np.empty(0, dtype=np.int64), messages=agg.messages,
                          aggregate=agg.mean, aggregate_kind="update" if kind == "update" else "weights",
                          interactions=None, documents=None)
        params, self.state = alg.server_step(served, self.state, view)
        return model_record(params), MetricRecord({})


def default_strategy(setup: EngineSetup, nodes: int | None = None) -> FedAvg:
    """The engine's aggregation and server step (``EngineFedAvg``) over the whole cohort every
    round, no client-side evaluation, on ``nodes`` SuperNodes (default: one per client)."""
    nodes = nodes or setup.clients
    return EngineFedAvg(setup, fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=nodes,
                        min_available_nodes=nodes, weighted_by_key="num-examples")


POLL_SECONDS = 0.1
"""How often the ServerApp pulls the replies of a round (Flower's HTTP grid: every 3 s)."""


class PolledGrid:
    """A ServerApp's ``Grid`` whose ``send_and_receive`` pulls the replies every ``POLL_SECONDS``
    (Flower's deployment grid sleeps 3 s between pulls: up to 3 s lost per round) and keeps the
    replies that are errors (Flower's typed ``Error``: ``code``, ``reason``) in ``reply_errors``.
    Everything else is the wrapped grid's."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.reply_errors: list[Error] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.grid, name)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        """Push ``messages``; the replies that arrive within ``timeout`` seconds (None: all)."""
        waiting = set(self.grid.push_messages(messages))
        end = None if timeout is None else time.monotonic() + timeout
        replies: list[Message] = []
        while waiting and (end is None or time.monotonic() < end):
            pulled = list(self.grid.pull_messages(waiting))
            replies += pulled
            waiting -= {m.metadata.reply_to_message_id for m in pulled}
            if waiting:
                time.sleep(POLL_SECONDS)
        self.reply_errors += [m.error for m in replies if m.has_error()]
        return replies


Curves = dict
"""``{setup: [(round, offline nDCG@10), ...]}``."""


def make_server_app(setups: EngineSetup | Sequence[EngineSetup],
                    strategy: Callable[[EngineSetup], Strategy] = default_strategy,
                    curves: Curves | None = None, curves_file: str | None = None,
                    reply_errors: list[Error] | None = None) -> ServerApp:
    """The ServerApp running each of ``setups`` in turn: ``strategy(setup)`` from the engine's
    initial model for ``setup.rounds`` rounds, on a ``PolledGrid``; offline nDCG@10 after each
    round goes to ``curves[setup]`` and, as a line ``algo,round,ndcg,unix_time`` (round 0: the
    start), to ``curves_file`` (a deployment's ServerApp runs in a process of the SuperLink's);
    the clients' error replies to ``reply_errors``."""
    setups = [setups] if isinstance(setups, EngineSetup) else list(setups)
    app = ServerApp()

    @app.main()
    def main(flower_grid: Grid, context: Context) -> None:
        grid = PolledGrid(flower_grid)
        for setup in setups:
            splits, alg = loaded(setup)
            eval_data = getattr(splits, setup.eval_split)

            def evaluate(round_: int, arrays: ArrayRecord, setup: EngineSetup = setup, alg: Any = alg,
                         eval_data: Any = eval_data) -> MetricRecord:
                ndcg = offline_ndcg(alg.ranker, flat(arrays), eval_data) if round_ > 0 else float("nan")
                if curves is not None and round_ > 0:
                    curves.setdefault(setup, []).append((round_, ndcg))
                if curves_file is not None:
                    with open(curves_file, "a") as fh:
                        fh.write(f"{setup.algo},{round_},{ndcg!r},{time.time()!r}\n")
                return MetricRecord({"offline_ndcg10": ndcg})

            init = alg.init_params(stream(setup.seed, "init"))
            strategy(setup).start(grid=grid, initial_arrays=model_record(init), num_rounds=setup.rounds,
                                  train_config=ConfigRecord({SETUP: setup.to_json()}), evaluate_fn=evaluate)
            if reply_errors is not None:
                reply_errors.extend(grid.reply_errors)
                grid.reply_errors.clear()

    return app


def for_setup(setup: EngineSetup, mod: Callable) -> Callable:
    """``mod`` applied to the train messages of ``setup`` only (other federations of the run pass)."""
    wanted = setup.to_json()

    def only(msg: Message, context: Context, call_next: Callable) -> Message:
        config = msg.content.config_records.get("config")
        if config is not None and config.get(SETUP) == wanted:
            return mod(msg, context, call_next)
        return call_next(msg, context)

    return only


def recording_mod(setup: EngineSetup, folder: str, rounds: set[int] | None = None, defense: str = "none"):
    """A ``RecordingMod`` for ``setup``'s messages, knowing its ranker and documents (the training split)."""

    kind = algorithms.algorithm_spec(setup.algo).message_kind
    return for_setup(setup, RecordingMod(folder, rounds=rounds, algorithm=setup.algo, defense=defense,
                                         ranker=loaded(setup)[1].ranker, documents=lambda: loaded(setup)[0].train,
                                         reply_holds=kind))


def recording_strategy(setup: EngineSetup, strategy: Strategy, folder: str, *, sees: str = "messages",
                       rounds: set[int] | None = None, defense: str = "none"):
    """A ``RecordingStrategy`` around ``strategy`` with this federation's ranker, documents and --
    for scoring only -- its ground truth (the engine's clicks of the served model's round)."""

    def truth(round_: int, served: np.ndarray, participants: np.ndarray) -> np.ndarray:
        return cohort_step(setup, round_, served)[1].clicks[participants]

    return RecordingStrategy(strategy, folder, sees=sees, rounds=rounds, algorithm=setup.algo, defense=defense,
                             ranker=loaded(setup)[1].ranker, documents=lambda: loaded(setup)[0].train, truth=truth,
                             reply_holds=algorithms.algorithm_spec(setup.algo).message_kind)


def simulate(*setups: EngineSetup, strategy: Callable[[EngineSetup], Strategy] = default_strategy,
             mods: Sequence[Callable] = (), cpus: int = 2, curves_file: str | None = None, log: bool = True
             ) -> list[list[tuple[int, float]]]:
    """Run the federations ``setups`` one after the other in one start of Flower's simulation
    runtime (Ray), one SuperNode per client (they must share ``clients``); their offline nDCG@10
    curves ``[(round, ndcg), ...]`` in order (and timed lines in ``curves_file``, see
    ``make_server_app``). ``cpus``: Ray's CPUs, one ClientApp actor each (every actor imports the
    project and loads the data once). ``log``: False holds Flower's and Ray's log back
    (``fltr_audit.flower.quiet``). FltrError when a client replied with an error."""
    # start-up: flwr.simulation costs 0.45 s CPU; ClientApps never use it
    from flwr.simulation import run_simulation

    if not setups or len({s.clients for s in setups}) != 1:
        raise FltrError("Flower simulation: the federations of one run need the same number of clients")
    curves: Curves = {}
    errors: list[Error] = []
    init_args = {"num_cpus": cpus, **({} if log else QUIET_RAY_INIT)}
    with contextlib.nullcontext() if log else quiet_flower():
        run_simulation(make_server_app(setups, strategy, curves, curves_file, errors), make_client_app(mods),
                       num_supernodes=setups[0].clients,
                       backend_config={"client_resources": {"num_cpus": 1}, "init_args": init_args})
    if errors:
        raise FltrError(f"Flower run: {len(errors)} client replies were errors, first: code {errors[0].code}, "
                        f"{errors[0].reason}")
    for setup in setups:
        if len(curves.get(setup, [])) != setup.rounds:
            raise FltrError(f"Flower run ({setup.algo}): finished {len(curves.get(setup, []))} of {setup.rounds} "
                            f"rounds ({'see Flower' if log else 'run it without --quiet for Flower'}'s log)")
    return [curves[s] for s in setups]
