"""Tutorial 3: compare defenses at matched privacy over the whole run.

A per-round ε says little about a run: what a user spends is the per-round mechanism composed
over the rounds it took part in. Against the server, who draws the cohorts, there is no
amplification by sampling. This tutorial finds, for two mechanisms, the per-round parameter
that spends the same ε over the run against the server (worst user), then audits both.
"""

import argparse

from scipy.optimize import brentq

import fltr_audit

parser = argparse.ArgumentParser()
parser.add_argument("--small", action="store_true", help="the reduced size CI runs")
args = parser.parse_args()

ROUNDS, CLIENTS, POPULATION, DELTA = (5, 100, 1000, 1e-5) if args.small else (20, 1000, 10000, 1e-5)
TARGET = 20.0  # epsilon over the run, against the server, for the worst user


def run_epsilon(defense: str) -> float:
    accountant = fltr_audit.accountant(defense, rounds=ROUNDS, clients=CLIENTS, population=POPULATION)
    return accountant.get_epsilon(DELTA, scope="server")


laplace_eps = brentq(lambda e: run_epsilon(f"dp-local-laplace(eps={e})") - TARGET, 0.01, 50, xtol=1e-3)
gaussian_sigma = brentq(lambda s: run_epsilon(f"dp-gaussian(sigma={s},clip=1)") - TARGET, 0.5, 4, xtol=1e-3)
defenses = [f"dp-local-laplace(eps={laplace_eps:.3f})", f"dp-gaussian(sigma={gaussian_sigma:.3f},clip=1)"]
for d in defenses:
    observer = fltr_audit.accountant(d, rounds=ROUNDS, clients=CLIENTS, population=POPULATION).get_epsilon(
        DELTA, scope="observer")
    print(f"{d}: epsilon over {ROUNDS} rounds against the server {run_epsilon(d):.2f}, "
          f"against an observer of the released models {observer:.2f}")

result = fltr_audit.audit(data="synthetic:mq2008", train_rounds=ROUNDS, clients=CLIENTS, population=POPULATION,
                         defenses=["none", *defenses], attacks=["olsr", "score", "random3"],
                         click_models=["perfect"], seeds=[0], epsilon_audit=False)
result.summary()
