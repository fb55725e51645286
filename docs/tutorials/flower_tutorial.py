"""Audit your Flower app: the recording mod added to a ClientApp, a simulated run, what was recorded.

    python docs/tutorials/flower_tutorial.py [--small]

Writes ``recording/`` (what the server received from each client, with the shown lists and clicks
the app attaches) and ``blind-recording/`` (the same messages recorded without them, as a generic
app would be recorded) in the current folder; ``fltr-audit attack`` reads both.
"""

import argparse

from flwr.clientapp.mod import LocalDpMod  # noqa: F401  (Flower's own mods go inside the recorder)

from fltr_audit.flower import RecordingMod
from fltr_audit.flower.engine_app import EngineSetup, loaded, simulate

parser = argparse.ArgumentParser()
parser.add_argument("--small", action="store_true", help="the reduced size CI runs")
args = parser.parse_args()

# The app: FPDGD on Flower, a ranker trained from each client's clicks (our ClientApp; yours has
# its own train handler). Ten clients, each one SuperNode of the simulation.
setup = EngineSetup(data="synthetic:mq2008", algo="fpdgd", clients=10, queries_per_client=4,
                    rounds=3 if args.small else 20, click_model="navigational", seed=0)
splits, algorithm = loaded(setup)

# The one change to your app: a recording mod, outermost, so that it records what leaves the
# client after every other mod (LocalDpMod's noise included: mods=[recorder, LocalDpMod(...)]).
# Given the documents and the ranker, it also records the shown lists the app attaches to its
# reply (config "fltr.shown") and the clicks it keeps in context.state ("fltr.truth", never sent).
recorder = RecordingMod("recording", rounds={2}, algorithm="fpdgd", ranker=algorithm.ranker,
                        documents=lambda: splits.train)
blind = RecordingMod("blind-recording", rounds={2}, algorithm="fpdgd")  # messages only

(curve,) = simulate(setup, mods=[recorder, blind], cpus=1)
print(f"trained {len(curve)} rounds on Flower: offline nDCG@10 {curve[-1][1]:.4f}")
print("recorded round 2 of every client: recording/ (with shown lists and clicks), blind-recording/ (without)")
