"""The command line's options, each declared once -- its spelling, its help and whether it takes a
list -- so that one setting has one name on every command (``tests/test_option_names.py`` holds
it). A command takes its options from here and gives each its default in its own signature.

List options (``LIST_OPTIONS``) are written either repeated or comma-separated (``--seed 0,1`` =
``--seed 0 --seed 1``; commas inside parentheses do not split: ``--defense "clip(sensitivity=5)+dp-distributed(eps=4.5)"``);
``cli.spelling.normalize`` rewrites either form into the repeated one. Old spellings
(``DEPRECATED``) still work with one warning line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from fltr_audit.errors import FltrError

LIST_OPTIONS = ("--seed", "--fold", "--defense", "--attack", "--click-model", "--p", "--by", "--cohorts", "--k",
                "--pool")
"""Options that take several values where a command declares them as lists (``typing.List``)."""

DEPRECATED = {"--click-models": "--click-model", "--C": "--svm-c", "--train-rounds": "--rounds",
              "--cohort": "--probe-cohort"}
"""Old option spelling -> the current one (the same option in every command)."""

DEPRECATED_POSITIONAL = {"--algo": "ALGORITHM"}
"""Old options whose value is now the command's positional argument."""

ALGORITHMS_HELP = "fpdgd | pdgd | foltr-es | fedips | fedavg, or an installed plug-in (fltr-audit algorithms list)."

Algorithm = Annotated[str, typer.Argument(help=ALGORITHMS_HELP, show_default=False, metavar="ALGORITHM")]
OptionalAlgorithm = Annotated[str, typer.Argument(help=ALGORITHMS_HELP, metavar="[ALGORITHM]")]

Data = Annotated[str, typer.Option("--data", help="Folder with Fold1..5, a LETOR file, or synthetic:PROFILE.")]
Fold = Annotated[int, typer.Option("--fold", help="Fold 1..5.")]
Folds = Annotated[List[int], typer.Option("--fold", help="Fold(s) 1..5: repeat or comma-separate.")]
Queries = Annotated[Optional[int], typer.Option("--queries", help="Keep at most this many queries per split.")]
Normalization = Annotated[str, typer.Option("--normalization",
                                            help="auto (the algorithm's) | none | query-minmax | zscore.")]
Rounds = Annotated[int, typer.Option("--rounds", help="Training rounds.")]
Clients = Annotated[int, typer.Option("--clients", help="Clients per round (the cohort).")]
QueriesPerClient = Annotated[int, typer.Option("--queries-per-client", help="B, queries (interactions) per client per round.")]
Population = Annotated[Optional[int], typer.Option(
    "--population", help="N persistent users each round's cohort is drawn from (default: the same --clients every round).")]
NonIID = Annotated[str, typer.Option(
    "--non-iid", help="Users' non-IID setting (Wang & Zuccon, SIGIR 2022): iid | document-preference(intents=4,share=0.5) "
                      "| label-skew(sets=4,skew=0.8) | click-preference | data-quantity(alpha=1).")]
_POISON_HELP = ("Malicious clients of every training cohort: none | NAME(fraction=F,...) with NAME one of data-poison, "
                "sign-flip, scale, noise, lie, ipm, adaptive (fltr-audit attacks list), F in [0, 0.5).")
Poison = Annotated[str, typer.Option("--poison", help=_POISON_HELP)]
Poisons = Annotated[List[str], typer.Option("--poison", help=_POISON_HELP + " Repeat for several; every defense also "
                                                                            "trains without one, for its privacy side.")]
Ranker = Annotated[str, typer.Option("--ranker", help="linear | mlp.")]
ClickModel = Annotated[Optional[str], typer.Option(
    "--click-model", help="The users' click model: perfect | navigational | informational, or pbm (FedIPS).")]
ClickModels = Annotated[List[str], typer.Option(
    "--click-model", help="Click model(s) probed: repeat or comma-separate (default: the algorithm's family).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed (the same seed gives the same numbers).")]
Seeds = Annotated[List[int], typer.Option("--seed", help="Seed(s): repeat or comma-separate.")]
Defense = Annotated[str, typer.Option("--defense", help="Defense stack, e.g. 'clip(sensitivity=5)+dp-distributed(eps=4.5)' "
                                                        "(fltr-audit defenses list).")]
Defenses = Annotated[List[str], typer.Option("--defense", help="Defense stack(s): repeat or comma-separate "
                                                               "(fltr-audit defenses list).")]
Attacks = Annotated[List[str], typer.Option("--attack", help="Attack(s): repeat or comma-separate (default: the "
                                                             "algorithm's set; fltr-audit attacks list).")]
ThreatModel = Annotated[str, typer.Option("--threat-model", help="server | server-blind | server-malicious.")]
ProbeCohort = Annotated[int, typer.Option("--probe-cohort", help="Clients per probed cohort (secure aggregation "
                                                                 "shows the server their aggregate).")]
Trials = Annotated[str, typer.Option("--trials", help="Trials per input of the epsilon audits, or 'auto' (sized to "
                                                      "the defense's claim).")]
MinEffect = Annotated[Optional[float], typer.Option(
    "--min-effect", help="Smallest leakage (AUC) worth finding: 'no measurable leakage' needs every informed attack's "
                         "upper 95 % bound below it; --power plans the lists for it. In (0, 1); default 0.05.",
    show_default=False)]
Power = Annotated[Optional[float], typer.Option("--power", help="Plan the lists so that a leak of --min-effect is "
                                                                "found, and zero leakage shown, with this probability "
                                                                "(default 0.9; --probe-lists fixes the count instead).",
                                                show_default=False)]
ProbeLists = Annotated[Optional[int], typer.Option("--probe-lists", help="Lists to score per click model (the probe "
                                                                         "repeats the split with new clients).")]
Canaries = Annotated[int, typer.Option("--canaries", help="Canaries (each present with probability 1/2).")]
Confidence = Annotated[float, typer.Option("--confidence", help="Confidence of the lower bounds.")]
Store = Annotated[Optional[Path], typer.Option("--store", help="SQLite results store.")]
Out = Annotated[Optional[Path], typer.Option("--out", help="Output folder for curves.csv, model.npy, config.json and "
                                                            "the recording (created; must not hold files); without "
                                                            "it nothing is written.")]
Workers = Annotated[int, typer.Option("--workers", help="Worker processes (0: one per core; 1: in this process).")]
Scheduler = Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address (needs fltr-audit[dask]).")]
EvalEvery = Annotated[int, typer.Option("--eval-every", help="Offline evaluation every K rounds (and the last).")]
RecordRounds = Annotated[Optional[str], typer.Option("--record-rounds", help="Rounds to record for attacks: "
                                                                             "1,50,100 or every:10.")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (nothing else there).")]
Quiet = Annotated[bool, typer.Option("--quiet", help="No progress on stderr.")]


def workers_of(workers: int) -> Optional[int]:
    """``--workers``: 0 means one per core (None to the executor)."""
    if workers < 0:
        raise FltrError("--workers: must be 0 (one per core) or more")
    return workers or None
