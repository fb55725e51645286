"""Tutorial 1: audit a defense on MQ2008 and read the two verdicts.

Trains FPDGD on MQ2008 Fold 1 (or the synthetic MQ2008-like set where the real one is absent),
probes it under no defense and under local Laplace noise, and prints the two verdicts per
defense with the ranker's nDCG beside them. ``--small`` is the reduced size CI runs.
"""

import argparse
from pathlib import Path

import fltr_audit

parser = argparse.ArgumentParser()
parser.add_argument("--small", action="store_true", help="the reduced size CI runs")
args = parser.parse_args()

mq2008 = Path(__file__).resolve().parents[3] / "shared" / "data" / "letor" / "MQ2008"
data = str(mq2008) if mq2008.is_dir() else "synthetic:mq2008"

result = fltr_audit.audit(
    data=data,
    folds=[1],
    train_rounds=5 if args.small else 20,
    clients=200 if args.small else 1000,
    defenses=["none", "dp-local-laplace(eps=4.5)"],
    attacks=["olsr", "score", "random3"],
    click_models=["perfect"],
    seeds=[0],
)

# The console's two tables: the leakage verdict (the attack that decided it, its interval
# simultaneous over the attacks, the lists scored and the smallest leak they could detect) and
# the claim verdict (worst-case audit of the declared mechanism, natural neighbours beside it).
result.summary()

# The same as DataFrames, for your own analysis:
verdicts = result.verdicts[["defense", "click_model", "leakage_verdict", "claim_verdict"]]
print(verdicts.to_string(index=False))
