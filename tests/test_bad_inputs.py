"""The bad-input corpus: every case is a command line (and the files it reads) that must end
with exit code 2, exactly one line on stderr naming the culprit, no traceback, and no file
written outside the test's own folder (nor any temporary file left inside it).

Families: LETOR data, defense strings, campaign files, CLI options, recordings, output paths;
round 2 (issue 23): sizes capped before allocation, internal errors on bad input, stores that are
not ours, links and the order of checks, input accepted with exit 0 though wrong, misleading
messages, signals (the peak-RSS bombs are in ``test_bad_inputs_memory.py``).
The commands run in-process (``fltr_audit.cli.main``) for speed.
"""

from __future__ import annotations

import gzip
import os
import random
import socket
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fltr_audit.cli import main
from tests.cli_json import cli_result

N_FEATURES = 46
SMALL = "synthetic:mq2008?queries=50"


def _line(label, qid, ids=range(1, N_FEATURES + 1), value=lambda j: f"0.{j % 10}") -> str:
    return f"{label} qid:{qid} " + " ".join(f"{j}:{value(j)}" for j in ids)


def _dense(n: int = 60) -> list[str]:
    return [_line(i % 3, i // 6) for i in range(n)]


def _sparse(n: int = 80) -> list[str]:
    rng = random.Random(1)
    return [_line(i % 3, i // 8, sorted(rng.sample(range(1, N_FEATURES), rng.randint(20, 40))) + [N_FEATURES])
            for i in range(n)]


def _with(lines: list[str], index: int, line: str) -> str:
    lines = list(lines)
    lines[index] = line
    return "\n".join(lines) + "\n"


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode())


GOOD = "\n".join(_dense()) + "\n"
SPARSE = _sparse()

# (case id, file contents, culprit the error line must name)
LETOR_CASES = [
    ("sparse-id-3e6", _with(SPARSE, 40, SPARSE[40] + " 3000000:1"), "line 41"),
    ("sparse-id-1e9", _with(SPARSE, 40, SPARSE[40] + " 1000000000:1"), "line 41"),
    ("dense-id-3e6", _with(_dense(), 30, _dense()[30] + " 3000000:1"), "line 31"),
    ("id-zero", _with(_dense(), 5, _line(1, 0, range(0, N_FEATURES))), "line 6"),
    ("token-without-colon", _with(_dense(), 7, _dense()[7].replace(" 5:", " 5 ")), "line 8"),
    ("label-1e400", _with(_dense(), 2, _line("1e400", 0)), "line 3"),
    ("label-negative", _with(_dense(), 2, _line(-1, 0)), "line 3"),
    ("label-fraction", _with(_dense(), 2, _line(2.5, 0)), "line 3"),
    ("label-300", _with(_dense(), 2, _line(300, 0)), "line 3"),
    ("label-word", _with(_dense(), 2, _line("high", 0)), "line 3"),
    ("qid-beyond-int64", _with(_dense(), 9, _line(1, 99999999999999999999)), "line 10"),
    ("qid-negative", _with(_dense(), 9, _line(1, -4)), "line 10"),
    ("qid-word", _with(_dense(), 9, _line(1, "abc")), "line 10"),
    ("missing-qid", _with(_dense(), 4, _dense()[4].replace("qid:0 ", "")), "line 5"),
    ("nan-feature", _with(_dense(), 11, _line(1, 1, value=lambda j: "nan" if j == 3 else "0.5")), "line 12"),
    ("inf-feature", _with(_dense(), 11, _line(1, 1, value=lambda j: "inf" if j == 3 else "0.5")), "line 12"),
    ("short-line", _with(_dense(), 13, _line(1, 2, range(1, N_FEATURES))), "line 14"),
    ("decreasing-ids", _with(SPARSE, 3, "1 qid:0 5:0.1 3:0.2 46:0.1"), "line 4"),
    ("empty-file", "", "no data lines"),
    ("comments-only", "# nothing here\n\n# still nothing\n", "no data lines"),
    ("binary-garbage", bytes(range(256)) * 20, "line"),
    ("truncated-gz", _gz(GOOD)[: len(_gz(GOOD)) // 2], "corrupt or truncated"),
    ("corrupt-gz", _gz(GOOD)[:10] + b"x" * 64 + _gz(GOOD)[74:], "corrupt or truncated"),
    ("gz-header-only", _gz(GOOD)[:12], "corrupt or truncated"),
    # round 2: a feature id beyond int64 names its line; a line over the cap names its line
    ("id-beyond-int64", _with(SPARSE, 20, SPARSE[20] + " 99999999999999999999:1"), "line 21"),
    ("dense-id-beyond-int64", _with(_dense(), 20, _dense()[20] + " 99999999999999999999:1"), "line 21"),
    ("line-2-mib", _with(_dense(), 3, _dense()[3] + " #" + "x" * (2 << 20)), "line 4"),
    ("line-of-nuls-at-the-end", GOOD + "\0" * (3 << 20), f"line {len(_dense()) + 1}"),
    ("gz-ratio-bomb", gzip.compress(b"\n" * (80 << 20), 9), "compression bomb"),
    ("gz-long-line", gzip.compress(b"\0" * (40 << 20), 9), "line 1"),
]


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture()
def run_bad(tmp_path, monkeypatch, capsys):
    """Run a command line in ``tmp_path/work`` and check the contract of a bad input."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(work / "cache"))
    outside = tmp_path.parent
    before = _snapshot(outside) - {p for p in _snapshot(outside) if p.startswith(tmp_path.name)}

    def run(argv: list[str], culprit: str) -> str:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, f"exit {code}, stderr: {err}"
        assert len(lines) == 1, f"expected one line on stderr, got: {err}"
        assert "Traceback" not in err
        assert culprit in lines[0], f"{culprit!r} not named in: {lines[0]}"
        after = _snapshot(outside) - {p for p in _snapshot(outside) if p.startswith(tmp_path.name)}
        assert after == before, f"files written outside the test folder: {after - before}"
        debris = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name]
        assert not debris, f"temporary files left behind: {debris}"
        return lines[0]

    run.work = work
    return run


@pytest.mark.parametrize("case, content, culprit", LETOR_CASES, ids=[c[0] for c in LETOR_CASES])
def test_letor_file(run_bad, case, content, culprit):
    path = run_bad.work / ("bad.txt.gz" if "gz" in case else "bad.txt")
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    line = run_bad(["data", "info", path], culprit)
    assert str(path) in line


def test_letor_split_folder_names_the_split_file(run_bad):
    folder = run_bad.work / "splits"
    folder.mkdir()
    for split in ("train", "vali", "test"):
        (folder / f"{split}.txt").write_text(GOOD)
    (folder / "vali.txt").write_text(_with(SPARSE, 40, SPARSE[40] + " 3000000:1"))
    run_bad(["train", "fpdgd", "--data", folder, "--out", run_bad.work / "o", "--rounds", 1, "--quiet"],
            "vali.txt, line 41")
    assert not (run_bad.work / "o").exists()


DEFENSE_CASES = [
    ("gaussian-sigma-tiny", "dp-gaussian(sigma=1e-300)", "sigma"),
    ("clip-huge-dp-tiny", "clip(sensitivity=1e308)+dp-distributed(eps=1e-308)", "dp-distributed"),
    ("laplace-eps-tiny", "clip(sensitivity=1)+dp-local-laplace(eps=1e-320)", "eps"),
    ("eps-nan", "dp-distributed(eps=nan)", "eps"),
    ("eps-inf", "dp-distributed(eps=inf)", "eps"),
    ("eps-negative", "dp-distributed(eps=-1)", "eps"),
    ("unknown-defense", "blur", "blur"),
    ("unknown-parameter", "clip(size=3)", "size"),
    ("not-a-number", "clip(sensitivity=big)", "sensitivity"),
    ("alias-not-a-number", "clip(delta=big)", "delta='big'"),
    ("threshold-one", "secagg-protocol(threshold=1)", "threshold"),
    ("threshold-makes-t-1", "secagg-protocol(threshold=0.01)", "threshold"),
    ("bits-8", "secagg-protocol(bits=8)", "bits"),
    ("odd-degree", "secagg-protocol(k=3)", "k=3"),
    ("drop-one", "secagg(drop=1)", "drop"),
    ("none-plus", "none+clip", "none"),
    ("aggregator-not-last", "secagg+clip", "secagg"),
    ("parameter-twice", "clip(sensitivity=1,sensitivity=2)", "twice"),
    ("parameter-and-its-alias", "clip(delta=1,sensitivity=2)", "deprecated alias 'delta'"),
    ("malformed", "clip(sensitivity=1", "malformed"),
    ("rr-p-too-small", "rr(p=0.01)", "p"),
    ("gaussian-dp-delta-one", "dp-gaussian(dp_delta=1)", "dp_delta"),
    ("range-inf", "secagg-protocol(range=inf)", "range"),
]


@pytest.mark.parametrize("case, defense, culprit", DEFENSE_CASES, ids=[c[0] for c in DEFENSE_CASES])
def test_defense_string(run_bad, case, defense, culprit):
    out = run_bad.work / "o"
    run_bad(["train", "fpdgd", "--data", SMALL, "--out", out, "--rounds", 1, "--clients", 5, "--queries-per-client", 2, "--quiet",
             "--defense", defense], culprit)
    assert not out.exists()


def test_secagg_protocol_all_clients_dropping_out_aborts_the_run(run_bad):
    out = run_bad.work / "o"
    run_bad(["train", "fpdgd", "--data", SMALL, "--out", out, "--rounds", 1, "--clients", 3, "--quiet",
             "--defense", "secagg-protocol(drop=0.99)"], "secagg-protocol")
    assert not out.exists()


CAMPAIGN_BASE = """\
name = "bad"
seeds = [0]
[data]
spec = ["synthetic:mq2008?queries=30"]
[algorithm]
name = ["fpdgd"]
rounds = [1]
clients = [5]
[probe]
click_models = ["perfect"]
probe_cohort = [4]
[audit]
defenses = ["none"]
attacks = ["random3"]
trials = 100
"""


def _campaign(old: str, new: str) -> str:
    assert old in CAMPAIGN_BASE
    return CAMPAIGN_BASE.replace(old, new)


CAMPAIGN_CASES = [
    ("fold-9", _campaign("[algorithm]", "folds = [9]\n[algorithm]"), "data.folds"),
    ("seed-negative", _campaign("seeds = [0]", "seeds = [-1]"), "seeds"),
    ("seed-2-66", _campaign("seeds = [0]", f"seeds = [{2**66}]"), "seeds"),
    ("unknown-params-key", _campaign("clients = [5]", "clients = [5]\nparams = { speed = 3 }"), "speed"),
    ("bad-normalization", _campaign("[algorithm]", 'normalization = "l2"\n[algorithm]'), "data.normalization"),
    ("unknown-ranker", _campaign("clients = [5]", 'clients = [5]\nranker = ["forest"]'), "algorithm.ranker"),
    ("queries-zero", _campaign("[algorithm]", "queries = 0\n[algorithm]"), "data.queries"),
    ("min-shown-negative", _campaign("probe_cohort = [4]", "probe_cohort = [4]\nmin_shown = -3"), "probe.min_shown"),
    ("table-as-parameter", _campaign("clients = [5]", "clients = [5]\nparams = { lr = { a = 1 } }"), "params.lr"),
    ("bad-synthetic-query", _campaign("queries=30", "queries=lots"), "data.spec"),
    ("unknown-profile", _campaign("synthetic:mq2008?queries=30", "synthetic:msn"), "data.spec"),
    ("empty-seeds", _campaign("seeds = [0]", "seeds = []"), "seeds"),
    ("empty-params-list", _campaign("clients = [5]", "clients = [5]\nparams = { lr = [] }"), "params.lr"),
    ("empty-attacks", _campaign('attacks = ["random3"]', "attacks = []"), "audit.attacks"),
    ("missing-name", _campaign('name = "bad"', ""), "name"),
    ("unknown-key", _campaign("[probe]", "[probe]\nspeed = 3"), "probe.speed"),
    ("unknown-attack", _campaign('attacks = ["random3"]', 'attacks = ["telepathy"]'), "audit.attacks"),
    ("unknown-click-model", _campaign('click_models = ["perfect"]', 'click_models = ["psychic"]'), "click model"),
    ("trials-two", _campaign("trials = 100", "trials = 2"), "audit.trials"),
    ("cohort-zero", _campaign("probe_cohort = [4]", "probe_cohort = [0]"), "probe.probe_cohort"),
    ("rounds-float", _campaign("rounds = [1]", "rounds = [1e20]"), "algorithm.rounds"),
    ("rounds-huge", _campaign("rounds = [1]", f"rounds = [{10**12}]"), "algorithm.rounds"),
    ("clients-huge", _campaign("clients = [5]", f"clients = [{10**9}]"), "algorithm.clients"),
    ("grid-too-large", _campaign("seeds = [0]", f"seeds = {list(range(200))}\n")
     .replace('defenses = ["none"]', 'defenses = ["none", "secagg", "clip", "clip(sensitivity=1)", '
                                     '"clip(sensitivity=2)", "clip(sensitivity=3)"]'), "grid"),
    ("missing-data-path", _campaign("synthetic:mq2008?queries=30", "no/such/folder"), "data.spec"),
    ("bad-defense", _campaign('defenses = ["none"]', 'defenses = ["dp-gaussian(sigma=0)"]'), "audit.defenses"),
    ("bad-split", _campaign("probe_cohort = [4]", 'probe_cohort = [4]\nsplit = ["holdout"]'), "probe.split"),
    ("invalid-toml", "name = \n", "TOML"),
    # round 2
    ("nested-5000-deep", 'name = "deep"\nseeds = ' + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("seeds-twice", _campaign("seeds = [0]", "seeds = [0, 0]"), "'seeds' holds 0 twice"),
    ("attack-twice", _campaign('attacks = ["random3"]', 'attacks = ["random3", "random3"]'), "audit.attacks"),
    ("spec-folder-without-folds", _campaign("synthetic:mq2008?queries=30", "."), "neither Fold1..Fold5"),
    ("non-utf8", CAMPAIGN_BASE.encode().replace(b'"bad"', b'"b\xff\xfed"'), "UTF-8"),
]


@pytest.mark.parametrize("case, content, culprit", CAMPAIGN_CASES, ids=[c[0] for c in CAMPAIGN_CASES])
def test_campaign_file(run_bad, case, content, culprit):
    path = run_bad.work / "bad.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    store = run_bad.work / "s.sqlite"
    line = run_bad(["campaign", "run", path, "--store", store, "--workers", 1, "--quiet"], culprit)
    if case != "grid-too-large":  # that one names the campaign and --max-runs
        assert "bad.toml" in line
    assert not store.exists(), "a rejected campaign must not create its store"


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("address, reason", [("nowhere:1", "the host nowhere does not resolve"),
                                             (None, "nothing listens on port")], ids=["no-host", "closed-port"])
def test_bad_scheduler_address_fails_at_once_before_creating_the_store(run_bad, address, reason):
    """Named at once, not after Dask's 10 s of retries (it took them until this cycle's end)."""
    address = address or _closed_port()
    path = run_bad.work / "c.toml"
    path.write_text(CAMPAIGN_BASE)
    store = run_bad.work / "s.sqlite"
    line = run_bad(["campaign", "run", path, "--store", store, "--scheduler", address, "--quiet"], "--scheduler")
    assert reason in line
    assert not store.exists()


def _train(*extra) -> list:
    return ["train", "fpdgd", "--data", SMALL, "--out", "o", "--rounds", 1, "--clients", 5, "--queries-per-client", 2, "--quiet", *extra]


OPTION_CASES = [
    ("rounds-1e20", ["train", "fpdgd", "--data", SMALL, "--out", "o", "--rounds", "1e20"], "--rounds"),
    ("rounds-zero", ["train", "fpdgd", "--data", SMALL, "--out", "o", "--rounds", 0], "--rounds"),
    ("rounds-huge", ["train", "fpdgd", "--data", SMALL, "--out", "o", "--rounds", 10**12], "--rounds"),
    ("clients-huge", _train("--clients", 10**9), "--clients"),
    ("seed-negative", _train("--seed", -1), "--seed"),
    ("seed-2-66", _train("--seed", 2**66), "--seed"),
    ("fold-9", _train("--fold", 9), "--fold"),
    ("eval-split-train", _train("--eval-split", "train"), "--eval-split"),
    ("click-model-unknown", _train("--click-model", "psychic"), "--click-model"),
    ("normalization-unknown", _train("--normalization", "l2"), "--normalization"),
    ("ranker-unknown", _train("--ranker", "forest"), "--ranker"),
    ("threat-model-unknown", _train("--threat-model", "god"), "--threat-model"),
    ("record-rounds-bad", _train("--record-rounds", "sometimes"), "--record-rounds"),
    ("queries-spec-word", ["train", "fpdgd", "--data", "synthetic:mq2008?queries=abc", "--out", "o"], "queries"),
    ("queries-spec-huge", ["train", "fpdgd", "--data", f"synthetic:mq2008?queries={10**9}", "--out", "o"],
     "queries"),
    ("queries-spec-unknown-key", ["train", "fpdgd", "--data", "synthetic:mq2008?rows=5", "--out", "o"], "rows"),
    ("unknown-profile", ["train", "fpdgd", "--data", "synthetic:msn", "--out", "o"], "msn"),
    ("data-missing", ["train", "fpdgd", "--data", "no/such/path", "--out", "o"], "no/such/path"),
    ("synth-queries-huge", ["data", "synth", "--queries", 10**9, "--out", "o"], "--queries"),
    ("synth-profile-unknown", ["data", "synth", "--profile", "msn", "--out", "o"], "--profile"),
    ("levels-one", ["epsilon", "--levels", 1], "--levels"),
    ("epsilon-p-word", ["epsilon", "--p", "half"], "--p"),
    ("min-shown-negative", ["attack", "rec", "--min-shown", -5], "--min-shown"),
    ("workers-negative", ["campaign", "run", "c.toml", "--store", "s.sqlite", "--workers", -1], "--workers"),
    ("status-missing-store", ["campaign", "status", "--store", "nope.sqlite"], "nope.sqlite"),
    ("report-missing-store", ["report", "--store", "nope.sqlite", "--out", "r"], "nope.sqlite"),
    # round 2: every size option of audit-defense capped before anything is drawn
    ("audit-defense-dim-1e9", ["audit-defense", "dp-local-laplace(eps=1)", "--dim", 10**9], "--dim"),
    ("audit-defense-trials-1e12", ["audit-defense", "dp-local-laplace(eps=1)", "--trials", 10**12], "--trials"),
    ("audit-defense-rounds-1e12", ["audit-defense", "dp-local-laplace(eps=1)", "--rounds", 10**12], "--rounds"),
    ("audit-defense-aggregate-trials-1e12", ["audit-defense", "dp-local-laplace(eps=1)", "--aggregate-trials", 10**12],
     "--aggregate-trials"),
    ("audit-defense-cohort-times-dim", ["audit-defense", "dp-local-laplace(eps=1)", "--probe-cohort", 10**6],
     "--probe-cohort"),
    # round 2: accepted with exit 0 before, though wrong
    ("defense-empty", _train("--defense", ""), "defense ''"),
    ("record-rounds-empty-item", _train("--record-rounds", "1,,2"), "--record-rounds"),
    ("record-rounds-beyond-rounds", _train("--record-rounds", "7"), "--record-rounds: 7"),
    ("record-rounds-step-beyond-rounds", _train("--record-rounds", "every:3"), "--record-rounds: every:3"),
    ("foltr-record-rounds-beyond", ["train", "foltr-es", "--data", SMALL, "--out", "o", "--rounds", 1,
                                    "--record-rounds", "5"], "--record-rounds: 5"),
    ("attack-empty-folder", ["attack", "rec", "--quiet"], "rec: not a recording"),
    # round 2: messages that misled
    ("lr-inf", _train("--lr", "inf"), "--lr"),
    ("lr-nan", _train("--lr", "nan"), "--lr"),
    ("foltr-sigma-inf", ["train", "foltr-es", "--data", SMALL, "--out", "o", "--rounds", 1, "--sigma", "inf"],
     "--sigma"),
]


@pytest.mark.parametrize("case, argv, culprit", OPTION_CASES, ids=[c[0] for c in OPTION_CASES])
def test_cli_option(run_bad, case, argv, culprit):
    if case in ("min-shown-negative", "attack-empty-folder"):
        (run_bad.work / "rec").mkdir()
    if case == "workers-negative":
        (run_bad.work / "c.toml").write_text(CAMPAIGN_BASE)
    run_bad(argv, culprit)
    assert not (run_bad.work / "o").exists() and not (run_bad.work / "s.sqlite").exists()


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A real two-round recording to damage."""
    out = tmp_path_factory.mktemp("rec") / "run"
    assert main(["train", "fpdgd", "--data", SMALL, "--out", str(out), "--rounds", "2", "--clients", "4",
                 "--record-rounds", "every:1", "--quiet"]) == 0
    return out / "recording"


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


RECORDING_CASES = ["empty-batch", "truncated-batch", "garbage-batch", "batch-missing-keys",
                   "missing-documents", "truncated-documents", "not-a-folder", "no-such-folder"]


@pytest.mark.parametrize("case", RECORDING_CASES)
def test_recording(run_bad, recording, case):
    rec = _copy(recording, run_bad.work / "rec")
    batch = rec / "batch-000001.npz"
    culprit = batch.name
    if case == "empty-batch":
        batch.write_bytes(b"")
    elif case == "truncated-batch":
        batch.write_bytes(batch.read_bytes()[:200])
    elif case == "garbage-batch":
        batch.write_bytes(os.urandom(500))
    elif case == "batch-missing-keys":
        np.savez(batch, round=np.int64(1))
    elif case == "missing-documents":
        for f in rec.glob("documents-*.npz"):
            f.unlink()
        culprit = "documents-0.npz"
    elif case == "truncated-documents":
        doc = rec / "documents-0.npz"
        doc.write_bytes(doc.read_bytes()[:300])
        culprit = "documents-0.npz"
    elif case == "not-a-folder":
        rec = run_bad.work / "file.npz"
        rec.write_bytes(b"x")
        culprit = "file.npz"
    elif case == "no-such-folder":
        rec = run_bad.work / "nowhere"
        culprit = "nowhere"
    run_bad(["attack", rec, "--attack", "olsr", "--quiet"], culprit)


def _blocker(work: Path) -> Path:
    blocker = work / "afile"
    blocker.write_text("not a folder")
    return blocker / "out"


OUTPUT_COMMANDS = {
    "train": lambda out: ["train", "fpdgd", "--data", SMALL, "--out", out, "--rounds", 1, "--clients", 4, "--quiet"],
    "data-synth": lambda out: ["data", "synth", "--queries", 10, "--out", out, "--quiet"],
    "campaign-run": None,
}


@pytest.mark.parametrize("command", ["train", "data-synth"])
@pytest.mark.parametrize("problem", ["under-a-file", "read-only", "not-empty", "is-a-file", "disk-full"])
def test_output_path(run_bad, monkeypatch, command, problem):
    work = run_bad.work
    out = work / "out"
    if problem == "under-a-file":
        out = _blocker(work)
    elif problem == "read-only":
        parent = work / "ro"
        parent.mkdir()
        parent.chmod(0o555)
        out = parent / "out"
        if os.access(parent, os.W_OK):  # root writes anyway: make creating in it fail as EACCES would
            import errno
            import tempfile

            def denied(*args, dir=None, **kwargs):
                if Path(dir) == parent:
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))
                return real(*args, dir=dir, **kwargs)

            real = tempfile.mkdtemp
            monkeypatch.setattr(tempfile, "mkdtemp", denied)
    elif problem == "not-empty":
        out.mkdir()
        (out / "keep.txt").write_text("x")
    elif problem == "is-a-file":
        out.write_text("x")
    elif problem == "disk-full":
        import errno

        def full(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", full)
    line = run_bad(OUTPUT_COMMANDS[command](out), "--out")
    if problem == "disk-full":  # named by the option, not by the temporary folder
        assert "no space left" in line.lower() and ".tmp" not in line
    if problem in ("not-empty", "is-a-file"):
        assert (out / "keep.txt").exists() if problem == "not-empty" else out.read_text() == "x"
    elif problem != "read-only":
        assert not out.exists()


@pytest.mark.parametrize("problem", ["store-under-a-file", "store-is-a-folder", "store-not-sqlite",
                                     "store-read-only-folder"])
def test_campaign_store_path(run_bad, problem):
    work = run_bad.work
    spec = work / "c.toml"
    spec.write_text(CAMPAIGN_BASE)
    store = work / "s.sqlite"
    if problem == "store-under-a-file":
        store = _blocker(work)
    elif problem == "store-is-a-folder":
        store.mkdir()
    elif problem == "store-not-sqlite":
        store.write_text("hello, not a database " * 100)
    elif problem == "store-read-only-folder":
        parent = work / "ro"
        parent.mkdir()
        parent.chmod(0o555)
        store = parent / "s.sqlite"
        if os.access(parent, os.W_OK):  # root writes into 0o555 folders: make the folder truly read-only
            _run_under_a_read_only_mount(parent, ["campaign", "run", spec, "--store", store, "--workers", 1,
                                                  "--quiet"], str(store.name))
            return
    run_bad(["campaign", "run", spec, "--store", store, "--workers", 1, "--quiet"], str(store.name))


def _run_under_a_read_only_mount(folder: Path, argv: list, culprit: str) -> None:
    """Run the CLI in a user + mount namespace (``unshare -rm``) where ``folder`` is bind-mounted
    read-only, so that even root gets EROFS there; the bad-input contract: exit 2, one stderr line
    naming the culprit, no traceback, nothing written into the folder."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("running as root without user namespaces (unshare -rm): a read-only folder cannot be made")
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"')
    cmd = ["unshare", "-rm", "sh", "-c", script, "sh", str(folder), sys.executable, "-m", "fltr_audit",
           *[str(a) for a in argv]]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]) + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, f"exit {done.returncode}, stderr: {done.stderr}"
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert culprit in lines[0], lines[0]
    assert list(folder.iterdir()) == []


def test_demo_out_under_a_file(run_bad):
    run_bad(["demo", "--out", _blocker(run_bad.work), "--rounds", 1, "--quiet"], "afile/out")


# --- round 2 (issue 23) ----------------------------------------------------------------------

def _five_folds(root: Path, skip: int | None = None) -> Path:
    for k in range(1, 6):
        if k != skip:
            (root / f"Fold{k}").mkdir(parents=True)
            for split in ("train", "vali", "test"):
                (root / f"Fold{k}" / f"{split}.txt").write_text(GOOD)
    return root


def test_data_info_refuses_a_five_fold_folder_with_a_fold_missing(run_bad):
    folder = _five_folds(run_bad.work / "d", skip=4)
    run_bad(["data", "info", folder], "without Fold4")


def test_split_file_that_is_a_folder_is_named(run_bad):
    folder = run_bad.work / "splits"
    folder.mkdir()
    (folder / "train.txt").mkdir()
    for split in ("vali", "test"):
        (folder / f"{split}.txt").write_text(GOOD)
    run_bad(["data", "info", folder], "train.txt: not a regular file")


def test_algorithm_plugin_that_is_not_an_algorithm_spec_is_named(run_bad, monkeypatch):
    from fltr_audit import plugins

    real = plugins.load
    monkeypatch.setattr(plugins, "load", lambda group, name: (lambda: 42) if name == "odd" else real(group, name))
    run_bad(["audit", "odd", "--quiet"], "plug-in 'odd'")


def _foreign_store(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def good_store(tmp_path_factory) -> Path:
    """A real store of CAMPAIGN_BASE (one run: only the reference attack random3)."""
    folder = tmp_path_factory.mktemp("store")
    (folder / "c.toml").write_text(CAMPAIGN_BASE)
    store = folder / "s.sqlite"
    assert main(["campaign", "run", str(folder / "c.toml"), "--store", str(store), "--workers", "1", "--quiet"]) == 0
    return store


def _copy_store(src: Path, dst: Path) -> Path:
    conn = sqlite3.connect(src)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    dst.write_bytes(src.read_bytes())
    return dst


def _store_commands(store: Path, work: Path) -> dict[str, list]:
    (work / "c.toml").write_text(CAMPAIGN_BASE)
    return {"status": ["campaign", "status", "--store", store],
            "compare": ["compare", "--store", store],
            "report": ["report", "--store", store, "--out", work / "r"],
            "run": ["campaign", "run", work / "c.toml", "--store", store, "--workers", 1, "--quiet"]}


STORE_COMMANDS = ["status", "compare", "report", "run"]


@pytest.mark.parametrize("command", STORE_COMMANDS)
@pytest.mark.parametrize("problem", ["other-schema", "newer-schema", "corrupt-pages", "corrupt-header",
                                     "planted-symlink"])
def test_store_that_is_not_ours_is_refused_without_writing(run_bad, good_store, problem, command):
    store = run_bad.work / "s.sqlite"
    culprit = "s.sqlite"
    if problem == "other-schema":
        _foreign_store(store)
        culprit = "another schema"
    elif problem == "newer-schema":
        _copy_store(good_store, store)
        conn = sqlite3.connect(store)
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
        culprit = "newer"
    elif problem.startswith("corrupt"):
        data = bytearray(_copy_store(good_store, store).read_bytes())
        first = 100 if problem == "corrupt-header" else 4096 * 2  # header, or every page but the first two
        for offset in range(first, len(data), 4096):
            data[offset:offset + 512] = random.Random(offset).randbytes(512)
        store.write_bytes(bytes(data))
        culprit = "corrupt"
    elif problem == "planted-symlink":
        store = run_bad.work / "link.sqlite"
        store.symlink_to(run_bad.work.parent / "elsewhere.sqlite")  # inside tmp_path: the fixture sees outside
        culprit = "symbolic link"
    before = store.read_bytes() if store.exists() and not store.is_symlink() else None
    line = run_bad(_store_commands(store, run_bad.work)[command], culprit)
    assert str(store.name) in line
    if before is not None:
        assert store.read_bytes() == before, "a refused store was written"
    assert not (run_bad.work.parent / "elsewhere.sqlite").exists()
    assert not (run_bad.work / "r").exists()


@pytest.mark.parametrize("command", ["status", "compare", "report"])
def test_read_only_commands_never_write_the_store(good_store, tmp_path, capsys, command):
    store = _copy_store(good_store, tmp_path / "s.sqlite")
    before = store.read_bytes()
    argv = _store_commands(store, tmp_path)[command]
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert store.read_bytes() == before


def test_report_of_a_campaign_that_ran_only_a_reference_attack(good_store, tmp_path, capsys):
    """random3 only: no informed attack, so no ROC panel (was ZeroDivisionError in plots._panels)."""
    store = _copy_store(good_store, tmp_path / "s.sqlite")
    code = main(["report", "--store", str(store), "--out", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "r" / "report.html").is_file()


@pytest.fixture()
def read_only_mount(tmp_path):
    """A tmpfs mounted read-only at tmp_path/ro holding a real store (needs root and mount)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a file system here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_store_on_a_read_only_file_system(read_only_mount, good_store, capsys):
    store = _copy_store(good_store, read_only_mount / "s.sqlite")
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    assert main(["campaign", "status", "--store", str(store)]) == 0  # read-only commands read it
    assert "1 done" in capsys.readouterr().out
    spec = read_only_mount.parent / "c.toml"
    spec.write_text(CAMPAIGN_BASE)
    assert main(["campaign", "run", str(spec), "--store", str(store), "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only" in err[0] and "not a results store" not in err[0], err


# --- failed runs: exit 1 with the cause ----------------------------------------------------

def _failing_run(monkeypatch):
    import fltr_audit.runs.campaign

    def boom(config):
        raise RuntimeError("boom in the run")

    monkeypatch.setattr(fltr_audit.runs.campaign, "run_audit", boom)


def test_campaign_with_a_failed_run_exits_1_naming_the_cause(tmp_path, monkeypatch, capsys):
    _failing_run(monkeypatch)
    spec = tmp_path / "c.toml"
    spec.write_text(CAMPAIGN_BASE)
    code = main(["campaign", "run", str(spec), "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "1 of 1 runs failed" in err[0] and "boom in the run" in err[0]


def test_audit_into_a_store_with_a_failed_run_exits_1_naming_the_cause(tmp_path, monkeypatch, capsys):
    _failing_run(monkeypatch)
    code = main(["audit", "--data", "synthetic:mq2008?queries=30", "--rounds", "1", "--clients", "5",
                 "--attack", "random3", "--click-model", "perfect", "--no-epsilon-audit", "--quiet",
                 "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert code == 1 and "boom in the run" in err and "Traceback" not in err


def test_an_internal_error_is_one_line_with_exit_1(tmp_path, monkeypatch, capsys):
    import fltr_audit.api.data

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(fltr_audit.api.data, "data_info", broken)
    code = main(["data", "info", "synthetic:mq2008"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "internal error: ZeroDivisionError: a bug" in err[0]


# --- signals: a 2-worker campaign stopped by Ctrl-C (finishes the runs in flight) and SIGTERM ----

SIGNAL_RUNS = 60  # enough that the campaign cannot finish in the second before the signal (idle: ~8 runs)
SIGNAL_CAMPAIGN = f"""\
name = "signals"
seeds = {list(range(SIGNAL_RUNS))}
[data]
spec = ["synthetic:mq2008?queries=200"]
[algorithm]
name = ["fpdgd"]
rounds = [10]
clients = [100]
[probe]
click_models = ["perfect"]
probe_cohort = [10]
[audit]
defenses = ["none"]
attacks = ["score"]
trials = 200
"""


def _done_runs(store: Path) -> int:
    if not store.exists():
        return 0
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM runs WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_campaign_stops_on_a_signal_and_keeps_every_finished_run(tmp_path, signum):
    import signal
    import sys
    import time

    spec, store = tmp_path / "c.toml", tmp_path / "s.sqlite"
    spec.write_text(SIGNAL_CAMPAIGN)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "FLTR_AUDIT_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "fltr_audit", "campaign", "run", str(spec), "--store", str(store),
                             "--workers", "2", "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    start = time.time()
    while _done_runs(store) < 1 and proc.poll() is None and time.time() - start < 600:
        time.sleep(0.2)
    time.sleep(1.0)  # the next runs are in flight
    at_signal = _done_runs(store)
    sent = time.time()
    os.killpg(proc.pid, getattr(signal, signum))  # the whole group, as Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=600)
    stopped = time.time() - sent
    lines = [line for line in err.splitlines() if line.strip()]
    after = _done_runs(store)
    print(f"{signum}: stopped {stopped:.1f} s after the signal; {at_signal} runs done then, {after} stored")
    assert "Traceback" not in err
    if signum == "SIGINT":
        assert proc.returncode == 130, err
        assert lines[0] == "stopping: finishing 2 runs in flight; Ctrl-C again to abandon them", err
        assert lines[-1].startswith("fltr-audit: interrupted: ") and len(lines) == 2, err
        # the two in flight were finished and stored (a third if one finished between the count and the
        # signal), nothing new started
        assert at_signal + 2 <= after <= at_signal + 3
    else:
        assert proc.returncode == 143 and lines == ["fltr-audit: terminated"], err
        assert after >= at_signal
    assert after < SIGNAL_RUNS
    # the store is whole and resumable: status lists the finished runs as done, the others pending
    status = subprocess.run([sys.executable, "-m", "fltr_audit", "campaign", "status", "--store", str(store), "--json"],
                            env=env, capture_output=True, text=True)

    rows = cli_result(status.stdout)
    assert sum(r["status"] == "done" for r in rows) == after
    assert sum(r["status"] == "pending" for r in rows) == SIGNAL_RUNS - after
