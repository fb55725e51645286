"""The verdict table of docs/flower-audit.md: Flower's LocalDpMod, its central DP wrappers (client- and
server-side clipping, fixed and adaptive) and SecAgg+ (as configured) under `fltr-audit audit`, the
command a user runs, at probe cohorts 2, 10 and 100; one markdown row per mechanism and cohort.

    python tools/flower_verdicts.py [--data ../shared/data/letor/MQ2008] [--cohorts 2,10,100]
                                    [--trials 4000] [--json-dir DIR] [--reuse]

Each cohort is one `fltr-audit audit --json` run (FPDGD, MQ2008 Fold 1, navigational clicks, seed 0,
all mechanisms in one run so they share the probe); its JSON is kept in --json-dir (--reuse formats the
kept JSON without running again). Too slow for CI (13-19 minutes per cohort at load 15-26 on 2 cores: each DP
wrapper's aggregate claim audit calls Flower's own code once per trial), so the page says when and how
it was measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

MECHANISMS = (
    ("none", "no defense (reference)"),
    ("flwr-localdp(clip=1,sensitivity=1,epsilon=5,delta=1e-5)", "`LocalDpMod(clip=1, sensitivity=1, ε=5, δ=1e-5)`"),
    ("flwr-dp(noise_multiplier=1,clip=1,side=client)", "DP wrapper, client-side fixed clipping (z=1, C=1)"),
    ("flwr-dp(noise_multiplier=1,clip=1,side=client,adaptive=True,count_std=5)",
     "DP wrapper, client-side adaptive clipping (z=1, C0=1, σ_b=5)"),
    ("flwr-dp(noise_multiplier=1,clip=1,side=server)", "DP wrapper, server-side fixed clipping (z=1, C=1)"),
    ("flwr-dp(noise_multiplier=1,clip=1,side=server,adaptive=True,count_std=5)",
     "DP wrapper, server-side adaptive clipping (z=1, C0=1, σ_b=5)"),
    ("flwr-secaggplus(clipping_range=8,quantization_range=4194304,modulus_range=4294967296,max_weight=1000)",
     "`SecAggPlusWorkflow` (clipping_range 8, Q = 2^22, modulus 2^32, max_weight 1000)"),
)
"""(defense string, how the table names it), in table order."""


def audit_command(data: str, cohort: int, trials: int) -> list[str]:
    """The `fltr-audit audit` run of one probe cohort, every mechanism in it."""
    command = ["fltr-audit", "audit", "--data", data, "--click-model", "navigational", "--trials", str(trials),
               "--probe-cohort", str(cohort), "--quiet", "--json"]
    for defense, _ in MECHANISMS:
        command += ["--defense", defense]
    return command


def run(data: str, cohort: int, trials: int, out: Path) -> None:
    start = time.perf_counter()
    with open(out, "w") as fh:
        subprocess.run(audit_command(data, cohort, trials), stdout=fh, check=True)
    print(f"cohort {cohort}: {time.perf_counter() - start:.0f} s, load average {os.getloadavg()[0]:.1f}",
          file=sys.stderr)


def fmt(x: float | str | None, digits: int = 2) -> str:
    if x is None or x == "inf" or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{float(x):.{digits}f}"


def rows(result: dict, cohort: int) -> list[str]:
    """The markdown rows of one cohort's `audit --json` result: its verdicts come in the order the
    defenses were given (MECHANISMS), printed without their default parameters."""
    verdicts = result["verdicts"]
    if [v["defense"].split("(")[0] for v in verdicts] != [d.split("(")[0] for d, _ in MECHANISMS]:
        raise SystemExit(f"cohort {cohort}: the verdicts are not those of MECHANISMS, in order")
    out = []
    for (_, name), v in zip(MECHANISMS, verdicts):
        leak = (f"{v['leakage']:+.3f} [{v['leakage_ci_low']:+.3f}, {v['leakage_ci_high']:+.3f}] "
                f"({v['decisive_attack']})")
        claim = "none" if v["claimed_epsilon"] == "inf" else f"{fmt(v['claimed_epsilon'])} ({v['claimed_scope']})"
        worst = (f"ε ≥ {fmt(v['epsilon_lb'])} (ceiling {fmt(v['ceiling'])})"
                 if v["claim_verdict"] != "no claim" else "—")
        natural = (f"{v['claim_verdict_natural']}, ε ≥ {fmt(v['epsilon_lb_natural'])}"
                   if v.get("claim_verdict_natural") else "—")
        out.append(f"| {name} | {cohort} | {v['threat_model']} | {v['leakage_verdict']} | {leak} | "
                   f"{claim} | {v['claim_verdict']} | {worst} | {natural} | {v['ndcg10_delta']:+.3f} |")
    return out


HEADER = ("| mechanism (as configured) | probe cohort | threat model | leakage verdict | AUC leakage [95 %] "
          "(decisive attack) | claimed ε (scope) | claim verdict (worst-case) | worst-case audit | "
          "natural-neighbour audit | ΔnDCG@10 |\n|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/letor/MQ2008")
    parser.add_argument("--cohorts", default="2,10,100")
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--json-dir", type=Path, default=Path("flower-verdicts"))
    parser.add_argument("--reuse", action="store_true", help="format the JSON kept in --json-dir, run nothing")
    args = parser.parse_args(argv)
    cohorts = [int(c) for c in args.cohorts.split(",")]
    args.json_dir.mkdir(parents=True, exist_ok=True)
    lines = [HEADER]
    for cohort in cohorts:
        path = args.json_dir / f"cohort-{cohort}.json"
        if not args.reuse:
            run(args.data, cohort, args.trials, path)
        lines += rows(json.loads(path.read_text())["result"], cohort)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
