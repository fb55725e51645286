"""Audit your own defense in 10 minutes: register the plug-in, audit it, read both verdicts.

    python docs/tutorials/your_own_defense.py [--fixed] [--small]

``--fixed`` audits the corrected defense; ``--small`` is the reduced size CI runs.
"""

import argparse

import fltr_audit
from my_defense import BuggyLaplace, FixedLaplace

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true", help="audit FixedLaplace instead of BuggyLaplace")
parser.add_argument("--small", action="store_true", help="the reduced size CI runs")
args = parser.parse_args()

# 1. Register the defense under a name (an installed package would declare an entry point instead).
fltr_audit.register_defense("my-laplace", FixedLaplace if args.fixed else BuggyLaplace,
                            guarantee="eps-DP per message (as declared)")

# 2. Audit it beside no defense: FPDGD on the synthetic MQ2008 profile, one click model. The list
#    count is planned (minimum effect 0.05 AUC, power 0.9) so that the leakage verdict can decide.
result = fltr_audit.audit(
    data="synthetic:mq2008",
    rounds=5 if args.small else 20,
    clients=200 if args.small else 1000,
    defenses=["none", "my-laplace(eps=1)"],
    attacks=["olsr", "score", "random3"],
    click_models=["informational"],
    trials=2000 if args.small else 10000,
)

# 3. Read both verdicts: does the server learn the clicks, and does the defense keep its claim?
result.summary()
