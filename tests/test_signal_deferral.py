"""A SIGTERM or Ctrl-C that lands in a callback from C (numba compiling calls back into llvmlite
through ctypes, which prints and drops the exception) is sent again and raised where it propagates;
the CLI's train ran to its end after such a SIGTERM (about 1 run in 25 in CI's kill test)."""

import signal
from types import SimpleNamespace

import pytest

from fltr_audit.runs import interrupts


def _frame(module: str):
    return SimpleNamespace(f_globals={"__name__": module})


@pytest.fixture()
def resent(monkeypatch):
    sent = []

    class Now:
        def __init__(self, delay, fn, args):
            self.delay, self.fn, self.args, self.daemon = delay, fn, args, False

        def start(self):
            sent.append((self.delay, self.args[1], self.daemon))

    monkeypatch.setattr(interrupts.threading, "Timer", Now)
    return sent


@pytest.mark.parametrize("handler, signum, raised", [
    (interrupts.raise_terminated, signal.SIGTERM, interrupts.Terminated),
    (interrupts.raise_interrupted, signal.SIGINT, KeyboardInterrupt),
])
def test_a_signal_in_a_numba_or_llvmlite_frame_is_sent_again_and_raised_elsewhere(handler, signum, raised, resent):
    assert handler(signum, _frame("llvmlite.binding.executionengine")) is None
    assert handler(signum, _frame("numba.core.compiler")) is None
    assert resent == [(0.1, signum, True), (0.1, signum, True)]
    with pytest.raises(raised):
        handler(signum, _frame("fltr_audit.engine.training"))
    with pytest.raises(raised):
        handler(signum, None)
    assert len(resent) == 2
    interrupts.last_raised()


def test_the_second_ctrl_c_of_a_campaign_defers_too(resent):
    stop = interrupts.GracefulStop()
    stop.graceful, stop.requested = True, True
    stop._on_sigint(signal.SIGINT, _frame("llvmlite.binding.ffi"))
    assert resent == [(0.1, signal.SIGINT, True)]
    with pytest.raises(KeyboardInterrupt):
        stop._on_sigint(signal.SIGINT, _frame("fltr_audit.runs.campaign"))
