"""FPDGD on a real local Flower deployment: a SuperLink and SuperNodes on 127.0.0.1, `flwr run`, run by
the venv's `fltr-audit` without activation, every process stopped (also on SIGKILL of the command);
then `fltr-audit attack` on what the mod and the strategy recorded."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from tests.cli_json import cli_result

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra (flwr[simulation])")

from fltr_audit.cli import main  # noqa: E402
from fltr_audit.errors import FltrError  # noqa: E402
from fltr_audit.flower.deployment import check_reachable, free_port  # noqa: E402


BIN = Path(sys.executable).parent
DEPLOYMENT = ["flower", "run", "--runtime", "deployment", "--data", "synthetic:mq2008?queries=200", "--clients", "3",
              "--supernodes", "2", "--queries-per-client", "2", "--seed", "5", "--click-model", "navigational"]


def marked(value: str) -> dict[int, str]:
    """{pid: command line} of the live processes whose environment holds FLTR_TEST_RUN=value: the
    command the test started and everything it started, orphans and new sessions included."""
    found, needle = {}, f"FLTR_TEST_RUN={value}".encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0") \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


def unactivated(value: str, tmp: Path) -> dict[str, str]:
    """This environment as a user's shell has it without activating the venv: the venv's bin folder
    off the PATH, no VIRTUAL_ENV; FLTR_TEST_RUN=value marks what is started; temporary files (the
    logs a killed run keeps) go to ``tmp``."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != BIN.resolve()]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    tmp.mkdir(exist_ok=True)
    return {**env, "PATH": os.pathsep.join(path or ["/usr/bin", "/bin"]), "FLTR_TEST_RUN": value, "TMPDIR": str(tmp)}


def kill_marked(value: str) -> None:
    """The test's own clean-up: SIGKILL what is left of a run, each by its pid."""
    for pid in marked(value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_deployment_by_the_venvs_path_without_activation_records_and_is_attacked(tmp_path, capsys):
    """`VENV/bin/fltr-audit flower run --runtime deployment` with the venv off the PATH: a SuperLink and
    2 SuperNodes serving 3 clients (one node runs two clients' messages), one round; then nothing it
    started is left; `fltr-audit attack` on what the mod and the strategy recorded: all 3 clients' replies."""
    value, out = uuid.uuid4().hex, tmp_path / "out"
    try:
        done = subprocess.run([str(BIN / "fltr-audit"), *DEPLOYMENT, "--rounds", "1", "--record-rounds", "1",
                               "--timeout", "300", "--out", str(out), "--json"], cwd=tmp_path,
                              env=unactivated(value, tmp_path / "tmp"), capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stderr[-2000:]
        assert marked(value) == {}  # the SuperLink, SuperNodes, SuperExecs, ServerApp, ClientApps all stopped
    finally:
        kill_marked(value)
    assert cli_result(done.stdout)["runtime"] == "deployment"
    assert (out / "curves.csv").read_text().splitlines()[1].startswith("1,")
    assert (out / "flower" / "flwr-home" / "runtime-envs").is_dir()  # Flower's run environments kept in the work folder
    assert "Successfully started run" in (out / "flower" / "run.log").read_text()  # the logs moved into the output
    assert {"superlink.log", "supernode-0.log", "supernode-1.log"} <= {p.name for p in (out / "flower").iterdir()}
    for folder, rows in ((out / "recording", 3), (out / "server-recording", 1)):
        assert main(["attack", str(folder), "--attack", "olsr", "--all-lists", "--min-shown", "0", "--json",
                     "--quiet"]) == 0
        assert len(cli_result(capsys.readouterr().out)["rounds"]) == rows
    assert sorted(p.name[-6:] for p in (out / "recording").iterdir()) == ["000000", "000001", "000002"]


FLOWER_PROGRAMS = {"flower-superlink", "flower-supernode", "flower-superexec", "flwr-serverapp", "flwr-clientapp",
                   "flwr run"}


def test_sigkill_of_the_command_leaves_no_process(tmp_path):
    """SIGKILL of `fltr-audit flower run --runtime deployment` mid-run, once every kind of Flower process
    is up: within 30 s no process it started (or they started) is alive."""
    value = uuid.uuid4().hex
    command = subprocess.Popen([str(BIN / "fltr-audit"), *DEPLOYMENT, "--rounds", "500", "--timeout", "300",
                                "--out", str(tmp_path / "out")], cwd=tmp_path, env=unactivated(value, tmp_path / "tmp"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not FLOWER_PROGRAMS <= {p for p in FLOWER_PROGRAMS for line in marked(value).values() if p in line}:
            assert command.poll() is None and time.monotonic() < deadline, marked(value)
            time.sleep(0.2)
        before = marked(value)
        command.kill()
        command.wait()
        deadline = time.monotonic() + 30
        while marked(value) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(before) >= 9 and marked(value) == {}, (before, marked(value))
        assert [p.name for p in (tmp_path / "tmp").glob("fltr-audit-flower-logs-*/superlink.log")]  # the logs kept
    finally:
        command.kill()
        command.wait()
        kill_marked(value)


def test_a_failed_start_names_the_program_and_keeps_its_log(tmp_path, capsys, monkeypatch):
    """Flower's programs are found beside the interpreter: a `flower-superlink` there that fails at start
    is named with its exit code and its log, which is kept (the output folder is not written)."""
    fake_bin, kept = tmp_path / "bin", tmp_path / "tmp"
    fake_bin.mkdir(), kept.mkdir()
    (fake_bin / "python").symlink_to(sys.executable)
    (fake_bin / "flower-superlink").write_text("#!/bin/sh\necho 'cannot bind the Fleet API'\nexit 3\n")
    (fake_bin / "flower-superlink").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python"))
    monkeypatch.setattr(tempfile, "tempdir", str(kept))
    out = tmp_path / "out"
    assert main([*DEPLOYMENT, "--rounds", "1", "--timeout", "60", "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    (log,) = kept.glob("fltr-audit-flower-logs-*/superlink.log")
    assert len(err) == 1 and f"flower-superlink exited with code 3 (log: {log})" in err[0]
    assert log.read_text() == "cannot bind the Fleet API\n" and not out.exists()


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
