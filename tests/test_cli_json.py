"""Every command's ``--json``: one envelope (``docs/json-envelope.schema.json``), each command's
result as ``docs/reference/json.md`` documents it, run end to end on tiny synthetic inputs."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from fltr_audit._version import __version__
from fltr_audit.cli import main
from tests.cli_json import SCHEMA, envelope
from tests.test_bad_inputs import CAMPAIGN_BASE

DOC = Path(__file__).resolve().parents[1] / "docs" / "reference" / "json.md"
DATA = "synthetic:mq2008?queries=60"
CAMPAIGN = CAMPAIGN_BASE.replace('name = "bad"', 'name = "tiny"')
"""A campaign of one run."""

INVOCATIONS: dict[str, list[str]] = {
    "data synth": ["--profile", "mq2008", "--queries", "40", "--out", "{tmp}/syn", "--quiet"],
    "data info": ["{tmp}/syn"],
    "train fpdgd": ["--data", DATA, "--clients", "5", "--queries-per-client", "2", "--rounds", "2",
                    "--record-rounds", "2", "--out", "{tmp}/fpdgd", "--quiet"],
    "train pdgd": ["--data", DATA, "--rounds", "2", "--out", "{tmp}/pdgd", "--quiet"],
    "train fedips": ["--data", "synthetic:yahoo", "--queries", "60", "--clients", "5", "--rounds", "2",
                     "--out", "{tmp}/fedips", "--quiet"],
    "train fedavg": ["--data", "synthetic:yahoo", "--queries", "60", "--clients", "5", "--rounds", "2",
                     "--out", "{tmp}/fedavg", "--quiet"],
    "train foltr-es": ["--data", DATA, "--clients", "5", "--rounds", "2", "--defense", "rr(p=0.9)",
                       "--out", "{tmp}/foltr", "--quiet"],
    "train lambda-linear": ["--data", DATA, "--rounds", "2", "--out", "{tmp}/lambda", "--quiet"],
    "train baselines": ["--data", DATA, "--quiet"],
    "attack": ["{tmp}/fpdgd/recording", "--attack", "olsr,random3", "--min-shown", "0", "--click-model", "perfect",
               "--quiet"],
    "explain": ["lb/claim"],
    "audit": ["--data", DATA, "--rounds", "2", "--clients", "10", "--queries-per-client", "2",
              "--attack", "olsr,random3", "--click-model", "perfect", "--defense", "none",
              "--defense", "dp-local-laplace(eps=1)", "--probe-cohort", "10", "--min-shown", "3",
              "--trials", "200", "--probe-lists", "20", "--store", "{tmp}/audit.sqlite", "--quiet"],
    "compare": ["--store", "{tmp}/audit.sqlite"],
    "report": ["--store", "{tmp}/audit.sqlite", "--out", "{tmp}/report"],
    "campaign run": ["{tmp}/tiny.toml", "--store", "{tmp}/campaign.sqlite", "--workers", "1", "--quiet"],
    "campaign status": ["--store", "{tmp}/campaign.sqlite"],
    "audit-defense": ["clip+dp-distributed(eps=4.5)", "--dim", "8", "--trials", "400", "--probe-cohort", "3",
                      "--aggregate-trials", "200"],
    "audit-run": ["fpdgd", "--defense", "dp-local-laplace(eps=1)", "--canaries", "50", "--rounds", "3",
                  "--clients", "10", "--population", "60", "--queries-per-client", "2", "--data", DATA],
    "audit-unlearning": ["fpdgd", "--method", "federaser", "--forget", "5", "--canaries", "10", "--rounds", "4",
                         "--clients", "10", "--population", "40", "--queries-per-client", "2", "--data", DATA,
                         "--quiet"],
    "demo": ["--data", DATA, "--rounds", "1", "--clients", "10", "--probe-lists", "20", "--workers", "1",
             "--out", "{tmp}/demo", "--quiet"],
    "epsilon": ["--click-model", "perfect,navigational", "--p", "0.5,0.9"],
    "defenses list": [],
    "attacks list": [],
    "algorithms list": [],
    "bench attacks": ["--messages", "50", "--features", "8", "--repeats", "1"],
    "bench bandwidth": ["--data", DATA, "--clients", "5", "--repeats", "1"],
    "bench core": ["--lists", "50", "--queries", "50", "--repeats", "1"],
    "bench scaling": ["--data", DATA, "--cohorts", "5", "--k", "5", "--rounds", "1"],
    "bench data": ["--queries", "10", "--repeats", "1", "--quiet"],
    "bench defenses": ["--clients", "4", "--dim", "8", "--degree", "2", "--round-clients", "5", "--repeats", "1",
                       "--quiet"],
    "bench fpdgd": ["--data", DATA, "--clients", "5", "--rounds", "2", "--quiet"],
    "bench fedips": ["--data", "synthetic:yahoo?queries=60", "--clients", "5", "--rounds", "2", "--quiet"],
    "bench foltr-es": ["--data", DATA, "--clients", "5", "--rounds", "2", "--quiet"],
    "flower run": ["--data", DATA, "--clients", "1", "--rounds", "1", "--out", "{tmp}/flower"],  # one Ray actor
}
"""One tiny invocation of every command with ``--json`` (``{tmp}``: the module's scratch folder)."""


NEEDS = {"data info": "data synth", "attack": "train fpdgd", "compare": "audit", "report": "audit",
         "campaign status": "campaign run"}
"""The invocation that writes what another one reads (the folds, the recording, the stores)."""
SLOW = ("demo", "flower run")
"""Tested on their own (listed in tests/slow_tests.txt): about a minute each on a loaded machine."""


def run_json(command: str, tmp: Path) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``fltr-audit COMMAND ... --json`` run in this process."""
    argv = [*command.split(), *(a.replace("{tmp}", str(tmp)) for a in INVOCATIONS[command]), "--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """``printed(command)``: what its invocation printed, run once (after the one it needs)."""
    tmp = tmp_path_factory.mktemp("json")
    (tmp / "tiny.toml").write_text(CAMPAIGN)
    done: dict[str, tuple[int, str, str]] = {}

    def get(command: str) -> tuple[int, str, str]:
        if command in NEEDS:
            get(NEEDS[command])
        if command not in done:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("FLTR_AUDIT_CACHE", str(tmp / "cache"))
                done[command] = run_json(command, tmp)
        return done[command]

    return get


def json_commands() -> set[str]:
    """Every command of the CLI that has a ``--json`` option, by its path (not the ``train``
    commands of algorithms an earlier test registered and removed again)."""
    import typer

    from fltr_audit.engine.algorithms.registry import algorithm_specs
    from fltr_audit.cli import register_commands
    from fltr_audit.cli.app import app

    register_commands()
    algorithms = {spec.name for spec in algorithm_specs()} | {"baselines"}
    found = set()

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])
        gone = len(path) == 2 and path[0] == "train" and path[1] not in algorithms
        if not hasattr(command, "commands") and any("--json" in p.opts for p in command.params) and not gone:
            found.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return found


def test_every_json_command_is_run_here_described_by_the_schema_and_documented():
    """A new command with --json (or a renamed one) must be added to the schema, to json.md and here."""
    commands = json_commands()
    assert set(INVOCATIONS) == commands
    schema = json.loads(SCHEMA.read_text())
    assert set(schema["$defs"]) - {"real", "privacy"} == {c.replace(" ", "-") for c in commands}
    sections = dict(re.findall(r"^### `([a-z -]+)`\n(.*?)(?=^### |\Z)", DOC.read_text(), flags=re.M | re.S))
    assert set(sections) == commands
    for command, text in sections.items():  # every key the schema requires is documented in its section
        result = schema["$defs"][command.replace(" ", "-")]
        for required in _required_keys(result):
            assert f"`{required}`" in text, (command, required)
    shared = DOC.read_text().split("**`privacy`**")[1]
    assert all(f"`{key}`" in shared for key in schema["$defs"]["privacy"]["required"])


def _required_keys(schema: dict) -> list[str]:
    """The keys ``schema`` requires, nested in arrays and objects."""
    keys = list(schema.get("required", []))
    for sub in [*schema.get("properties", {}).values(), *([schema["items"]] if "items" in schema else [])]:
        keys += _required_keys(sub)
    return keys


def check_envelope(printed, command: str) -> dict:
    """The envelope ``command`` printed: exit 0, valid against the schema (the result's documented
    keys and types too), the version and command path, one JSON document and nothing else."""
    code, out, err = printed(command)
    assert code == 0, err
    body = envelope(out)
    assert (body["fltr_audit"], body["schema"], body["command"]) == (__version__, 1, command)
    assert list(body) == ["fltr_audit", "schema", "command", "result"]
    assert out == json.dumps(body, indent=2, ensure_ascii=True) + "\n"
    return body


@pytest.mark.parametrize("command", [c for c in INVOCATIONS if c not in SLOW])
def test_json_output_is_one_valid_envelope(printed, command):
    check_envelope(printed, command)


def test_demo_json_output_is_one_valid_envelope_with_references_as_references(printed):
    rows = check_envelope(printed, "demo")["result"]["attacks"]
    references = [r for r in rows if r["reference"]]
    assert references and {(r["leakage_verdict"], r["claim_verdict"]) for r in references} == {("reference",) * 2}
    assert all(r["leakage_verdict"] != "reference" for r in rows if not r["reference"])


def test_flower_run_json_output_is_one_valid_envelope(printed):
    pytest.importorskip("flwr")
    check_envelope(printed, "flower run")


def test_infinity_is_the_string_inf_and_nan_is_null(printed):
    """No defense claims no epsilon: infinite, the string "inf"; a TPR at an FPR below what the
    few lists resolve is NaN: null; no bare NaN or Infinity token anywhere."""
    text = printed("audit")[1]
    assert not re.search(r"\b(NaN|Infinity)\b", text)
    result = envelope(text)["result"]
    audits = {a["defense"]: a for a in result["audits"]}
    assert audits["none"]["claimed_epsilon"] == "inf" and audits["dp-local-laplace(eps=1)"]["claimed_epsilon"] == 1.0
    assert {r["tpr_at_fpr_0_001"] for r in result["attacks"]} == {None}


def test_errors_stay_one_stderr_line_and_print_no_envelope():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["epsilon", "--p", "nope", "--json"])
    assert (code, out.getvalue()) == (2, "")
    assert err.getvalue().count("\n") == 1 and "--p" in err.getvalue()


def test_the_helper_encodes_non_finite_numbers_one_way_and_names_the_command_path():
    import numpy as np
    import typer

    from fltr_audit.cli import register_commands
    from fltr_audit.cli.app import RUNNING_COMMAND, app
    from fltr_audit.cli.common import emit_json
    from fltr_audit.cli.spelling import command_names

    register_commands()
    out = io.StringIO()
    token = RUNNING_COMMAND.set(command_names(typer.main.get_command(app), ["bench", "core", "--repeats", "1"]))
    with contextlib.redirect_stdout(out):
        emit_json({"a": float("inf"), "b": -np.inf, "c": np.float32("nan"), "d": np.arange(2), "e": (np.int64(3),),
                   "f": [float("nan"), 1.5]})
    RUNNING_COMMAND.reset(token)
    body = json.loads(out.getvalue())
    assert body["command"] == "bench core"
    assert body["result"] == {"a": "inf", "b": "-inf", "c": None, "d": [0, 1], "e": [3], "f": [None, 1.5]}
