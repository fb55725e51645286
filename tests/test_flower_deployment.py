"""FPDGD on a real local Flower deployment: a SuperLink and 3 SuperNodes on 127.0.0.1, `flwr run`,
every process stopped by its pid; then `fltr-audit attack` on what the mod and the strategy recorded."""

import os

import pytest
from tests.cli_json import cli_result

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra (flwr[simulation])")

from fltr_audit.cli import main  # noqa: E402
from fltr_audit.errors import FltrError  # noqa: E402
from fltr_audit.flower.deployment import check_reachable, free_port, session_processes  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = open(f"/proc/{pid}/stat").read()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_local_deployment_records_and_is_attacked(tmp_path, capsys, monkeypatch):
    """`fltr-audit flower run --runtime deployment`: a SuperLink and 2 SuperNodes serving 3 clients (one
    node runs two clients' messages), one round, every process we started stopped by its pid;
    `fltr-audit attack` on what the mod and the strategy recorded: all 3 clients' replies."""
    started = []
    import subprocess

    real_popen = subprocess.Popen

    def spy(*args, **kwargs):
        p = real_popen(*args, **kwargs)
        started.append(p.pid)
        return p

    monkeypatch.setattr(subprocess, "Popen", spy)
    out = tmp_path / "out"
    assert main(["flower", "run", "--runtime", "deployment", "--data", "synthetic:mq2008?queries=200", "--clients", "3",
                 "--supernodes", "2", "--queries-per-client", "2", "--rounds", "1", "--seed", "5",
                 "--click-model", "navigational", "--record-rounds", "1", "--timeout", "600", "--out", str(out)]) == 0
    capsys.readouterr()
    assert (out / "curves.csv").read_text().splitlines()[1].startswith("1,")
    assert len(started) >= 3 and not any(_alive(pid) for pid in started)  # SuperLink and SuperNodes all stopped
    assert session_processes(set(started)) == []  # and what they started: the ServerApp, the ClientApps (orphans included)
    assert (out / "flower" / "flwr-home" / "runtime-envs").is_dir()  # Flower's run environments kept in the work folder
    for folder, rows in ((out / "recording", 3), (out / "server-recording", 1)):
        assert main(["attack", str(folder), "--attack", "olsr", "--all-lists", "--min-shown", "0", "--json",
                     "--quiet"]) == 0
        assert len(cli_result(capsys.readouterr().out)["rounds"]) == rows
    assert sorted(p.name[-6:] for p in (out / "recording").iterdir()) == ["000000", "000001", "000002"]


def test_an_unreachable_superlink_is_named():
    port = free_port()  # nothing listens there
    with pytest.raises(FltrError, match=f"--superlink: no SuperLink reachable at 127.0.0.1:{port}"):
        check_reachable(f"127.0.0.1:{port}")


def test_cli_names_an_unreachable_superlink_and_writes_nothing(tmp_path, capsys):
    port = free_port()
    out = tmp_path / "out"
    code = main(["flower", "run", "--data", "synthetic:mq2008?queries=200", "--superlink", f"127.0.0.1:{port}",
                 "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and f"--superlink: no SuperLink reachable at 127.0.0.1:{port}" in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_the_app_reads_a_relative_data_path_from_any_folder(tmp_path, monkeypatch):
    """Flower runs the ServerApp and ClientApps in folders of its own: a relative --data path is
    written absolute into the generated app (relative, the benchmark's MQ2008 run found no data)."""
    from fltr_audit.flower.deployment import Recording, write_app
    from fltr_audit.flower.engine_app import EngineSetup

    (tmp_path / "letor").mkdir()
    monkeypatch.chdir(tmp_path)
    app = write_app(tmp_path / "app", EngineSetup(data="letor", clients=3), Recording(), tmp_path / "curves.csv")
    namespace: dict = {}
    setup_line = next(line for line in (app / "fltr_app.py").read_text().splitlines() if line.startswith("SETUP ="))
    exec(setup_line, {"EngineSetup": EngineSetup}, namespace)
    assert namespace["SETUP"].data == str(tmp_path / "letor") and namespace["SETUP"].clients == 3


@pytest.mark.parametrize("args, message", [
    (["bogus"], "ALGORITHM: must be one of fpdgd, foltr-es, fedips, got 'bogus'"),
    (["fedips", "--click-model", "navigational"], "--click-model: fedips's users click by the position-based model"),
    (["foltr-es", "--server-sees", "aggregate"], "--server-sees: aggregate records nothing of foltr-es"),
])
def test_cli_names_a_bad_algorithm_setting_and_writes_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    code = main(["flower", "run", *args, "--data", "synthetic:mq2008?queries=200", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and message in err[0]
    assert list(tmp_path.iterdir()) == []


def test_cli_names_a_supernode_count_above_the_clients_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["flower", "run", "--runtime", "deployment", "--data", "synthetic:mq2008?queries=200",
                 "--clients", "3", "--supernodes", "4", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "--supernodes: 4 is not in 1..3 (the clients)" in err[0]
    assert list(tmp_path.iterdir()) == []
