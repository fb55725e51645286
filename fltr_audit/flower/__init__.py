"""fltr-audit on Flower (the optional extra ``fltr-audit[flower]``, ``flwr[simulation]``).

* ``RecordingMod`` -- a client mod ``mod(msg, context, call_next)`` that records what the server
  receives from a client in the open recording format (docs/recording-format.md);
* ``RecordingStrategy`` -- a server-side strategy wrapper recording what the server sees: every
  reply, or only the aggregate (``sees="aggregate"``);
* ``fpdgd_app`` -- FPDGD as a Flower ServerApp + ClientApp whose client step is the engine's;
* ``DefenseMod`` -- the project's client defenses Flower lacks (dp-distributed, rr) as mods;
* ``deployment`` -- a local deployment (SuperLink, SuperNodes, ``flwr run``) bounded in time.
* ``processes`` -- its processes: Flower's programs found beside the interpreter, each stopped
  by its pid with whatever it started, also on SIGKILL of the command (the supervisor of ``reaper``).

Part of the composition root (it wires the engine and ``defenses`` to Flower); nothing in the
engine imports it or ``flwr`` (tests/test_dependency_rule.py).
"""

from __future__ import annotations

from fltr_audit.errors import FltrError

try:
    import flwr  # noqa: F401
except ImportError:  # pragma: no cover - exercised only without the extra
    raise FltrError("the Flower integration needs flwr: pip install 'fltr-audit[flower]'") from None

from fltr_audit.flower.defense_mods import DefenseMod  # noqa: E402
from fltr_audit.flower.recording_mod import RecordingMod  # noqa: E402
from fltr_audit.flower.recording_strategy import RecordingStrategy  # noqa: E402

__all__ = ["DefenseMod", "RecordingMod", "RecordingStrategy"]
