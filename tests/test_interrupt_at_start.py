"""Ctrl-C (SIGINT) or SIGTERM at any instant of a command, start-up included, ends it with one
line and exit code 130 or 143: no traceback from inside the imports, no death by the signal
(issue 39, item 4), at the issue's 0.5, 1, 2 and 5 s. (In the first tenths of a second the
interpreter itself may still be starting -- its ``site`` module -- where no program's code runs.)"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "audit": ["audit", "--data", "synthetic:mq2008", "--rounds", "400", "--quiet"],  # longer than 5 s
    "audit-defense": ["audit-defense", "dp-local-laplace(eps=1)", "--trials", "2000000", "--quiet"],
}


def interrupted(args: list[str], after: float, signum: int) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "fltr_audit", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(after)
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("after", [0.5, 1.0, 2.0, 5.0])
def test_ctrl_c_at_any_instant_is_one_line_and_exit_130(command, after):
    code, err = interrupted(COMMANDS[command], after, signal.SIGINT)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err, (code, lines)


@pytest.mark.slow
@pytest.mark.parametrize("after", [0.5, 2.0])
def test_sigterm_at_start_is_one_line_and_exit_143(after):
    code, err = interrupted(COMMANDS["audit"], after, signal.SIGTERM)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 143 and len(lines) == 1 and "terminated" in lines[0], (code, err)
