"""One setting, one name (issue 36 item 3): walks every command's parameters and fails on two
spellings of one thing -- the same words up to plural and separators, one name extending another
(``--train-rounds`` / ``--rounds``), an option spelling a command's positional (``--algo`` /
ALGORITHM), or one help text under two names."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
import typer.main

from fltr_audit.cli import main, register_commands
from fltr_audit.cli.app import app
from fltr_audit.cli.options import DEPRECATED, DEPRECATED_POSITIONAL

DIFFERENT_THINGS = {
    frozenset(pair): why for *pair, why in [
        ("--aggregate-trials", "--trials", "audit-defense: trials of a cohort-aggregate row / of each input"),
        ("--batch-queries", "--queries", "lambda-linear's minibatch / the queries kept per split"),
        ("--by", "--by-client", "compare's grouping columns / attack's one row and verdict per recorded client"),
        ("--by-client", "--clients", "attack: one row per recorded client / the cohort of a round"),
        ("--clicks-per-client", "--clients", "FedIPS's m, clicks in one log / the cohort"),
        ("--clients", "--queries-per-client", "the cohort / B, a client's queries per round"),
        ("--clients", "--round-clients", "bench defenses: secure-aggregation cohort / the timed FPDGD round's"),
        ("--cohorts", "--probe-cohort", "bench scaling's swept cohort sizes / an audit's probed cohort"),
        ("--em-rounds", "--rounds", "FedIPS's rounds of EM for the propensities / training rounds"),
        ("--eval-split", "--split", "the split nDCG is measured on / the split an audit probes"),
        ("--lr", "--lr-global", "FedIPS: the clients' step / the server's step"),
        ("--lr", "--lr-local", "the learning rate / FedIPS's clients' step, where both are set"),
        ("--lists", "--probe-lists", "bench core's simulated result lists / an audit's probe lists"),
        ("--max-runs", "--runs", "campaign run's refusal threshold / audit-run's trainings"),
        ("--probe-queries", "--queries", "queries in one probe message / queries kept per split"),
        ("--queries", "--queries-per-client", "queries kept per split / B, a client's queries per round"),
        ("--record-rounds", "--rounds", "which rounds are recorded / how many are trained"),
        ("--round-clients", "--rounds", "bench defenses: the timed round's cohort / training rounds"),
        ("--poison", "--poison-check", "a poisoning attack of a run / audit-unlearning's check that the forgotten "
                                       "poisoners' effect goes"),
        ("--rounds", "--unlearn-rounds", "training rounds / audit-unlearning's rounds of finetune and pga"),
    ]
}
"""Name pairs the rules would flag that mean different things, each with the reason."""


def _commands() -> dict[str, Any]:
    """Every leaf command by its path, read from the click objects typer builds (through typer
    only: typer >= 0.26 vendors its own click)."""
    register_commands()
    out: dict[str, Any] = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, path + (name,))
        else:
            out[" ".join(path)] = cmd

    walk(typer.main.get_command(app), ())
    return out


COMMANDS = _commands()


def _visible(cmd: Any) -> list[tuple[str, str]]:
    """(spelling, help) of each parameter a user sees: options by their long flag, positionals by
    their metavar."""
    out = []
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "option":
            out += [(o, p.help or "") for o in p.opts if o.startswith("--") and o not in ("--help",)]
        else:
            out.append(((p.metavar or p.name).strip("[]").upper(), getattr(p, "help", "") or ""))
    return out


def _words(spelling: str) -> tuple[str, ...]:
    """The words of a spelling, lower case, singular: ``--click-models`` -> (click, model)."""
    return tuple(re.sub(r"s$", "", w) for w in re.split(r"[-_ ]+", spelling.strip("-").lower()) if w)


SPELLINGS = sorted({s for cmd in COMMANDS.values() for s, _ in _visible(cmd)})


def test_the_walk_sees_every_command():
    for name in ("train fpdgd", "audit", "audit-run", "audit-defense", "attack", "compare", "demo", "epsilon",
                 "campaign run", "defenses list"):
        assert name in COMMANDS, sorted(COMMANDS)
    assert {"--rounds", "--seed", "--defense", "--json", "--quiet"} <= set(SPELLINGS)


def _one_name_twice(a: str, b: str) -> str | None:
    """Why spellings ``a`` and ``b`` name one thing twice, or None."""
    wa, wb = _words(a), _words(b)
    if wa == wb:
        return f"{a} and {b} spell one name two ways"
    if a.startswith("--") and b.startswith("--"):
        short, long_ = sorted((wa, wb), key=len)
        if long_[-len(short):] == short or long_[:len(short)] == short:
            return f"{a} and {b}: one name extends the other (say why in DIFFERENT_THINGS if they differ)"
    return None


@pytest.mark.parametrize("a,b,flagged", [("--click-models", "--click-model", True),
                                         ("--train-rounds", "--rounds", True), ("--rounds-total", "--rounds", True),
                                         ("--seed", "--rounds", False), ("--round-robin", "--robin-rounds", False)])
def test_the_pair_rule_flags_plurals_and_extensions_only(a, b, flagged):
    assert (_one_name_twice(a, b) is not None) == flagged


def test_no_two_spellings_of_one_name():
    """Every pair of the ~100 spellings (one test: each pair a test was 5,000 collected items)."""
    found = [why for a, b in itertools.combinations(SPELLINGS, 2)
             if frozenset({a, b}) not in DIFFERENT_THINGS and (why := _one_name_twice(a, b))]
    assert found == []


def test_no_option_spells_a_positional():
    positionals = {s for s in SPELLINGS if not s.startswith("--")}
    for name, cmd in COMMANDS.items():
        for spelling, _ in _visible(cmd):
            if spelling.startswith("--"):
                for pos in positionals:
                    assert not pos.lower().startswith(spelling.strip("-")), (
                        f"{name}: option {spelling} spells the positional {pos}")


def test_one_help_text_has_one_name():
    by_help: dict[str, set[str]] = {}
    for cmd in COMMANDS.values():
        for spelling, help_ in _visible(cmd):
            if help_:
                by_help.setdefault(help_, set()).add(spelling)
    clashes = {h: s for h, s in by_help.items() if len(s) > 1}
    assert not clashes, clashes


RUN_COMMANDS = ("train fpdgd", "train foltr-es", "train fedips", "audit", "audit-run", "audit-unlearning",
                "audit-defense", "attack", "compare", "demo", "epsilon", "campaign run")


@pytest.mark.parametrize("name", RUN_COMMANDS)
def test_every_command_that_runs_takes_json_and_quiet(name):
    flags = {s for s, _ in _visible(COMMANDS[name])}
    assert {"--json", "--quiet"} <= flags, name


@pytest.mark.parametrize("name", ("train fpdgd", "train foltr-es", "train fedips", "audit", "audit-run",
                                  "audit-unlearning", "audit-defense", "attack", "demo", "flower run"))
def test_every_command_that_draws_randomness_takes_seed(name):
    assert "--seed" in {s for s, _ in _visible(COMMANDS[name])}, name


@pytest.mark.parametrize("old,new", sorted(DEPRECATED.items()))
def test_deprecated_spellings_are_hidden(old, new):
    assert old not in SPELLINGS and new in SPELLINGS


def test_deprecated_positional_spelling_is_hidden():
    assert not set(DEPRECATED_POSITIONAL) & set(SPELLINGS)


def test_an_unknown_option_names_itself_in_one_line(capsys):
    assert main(["audit", "--roundz", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--roundz" in err[0], err
