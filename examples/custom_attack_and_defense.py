"""Register your own attack and defense, then audit them against FPDGD.

Run from the project root:  python examples/custom_attack_and_defense.py [--rounds N]

The attack ``dot`` scores each shown document by the dot product of its features with the
client's update (w_local - w_global): PDGD moves the weights towards the features of clicked
documents, so clicked documents score high. The defense ``quantize(step)`` rounds every
coordinate of the update to a multiple of ``step`` (it claims no DP guarantee). Nothing in the
project is edited: both are registered from this script (an installed package would declare
them as entry points instead; see fltr_audit.plugins).
"""

from __future__ import annotations

import argparse

import numpy as np

import fltr_audit
from fltr_audit.privacy import mechanisms
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.engine.messages import Guess, Messages, ServerView


class DotAttack:
    """Score = features of the shown document . the client's update."""

    name = "dot"

    def guess(self, view: ServerView) -> Guess:
        if view.messages is None or view.interactions is None:
            raise ValueError("dot: needs each client's message and the shown lists (threat model 'server')")
        update = view.messages.updates(view.global_params)                # (n, P)
        shown = view.interactions.shown                                   # (n, B, k)
        features = view.documents.features[np.maximum(shown, 0)]          # (n, B, k, F)
        score = np.einsum("nbkf,nf->nbk", features, update[:, : features.shape[-1]])
        score = np.where(shown >= 0, score, np.nan)
        decision = np.zeros(shown.shape, dtype=bool)  # guess the top-scored document of each list
        best = np.nanargmax(np.where(shown >= 0, score, -np.inf), axis=-1)
        np.put_along_axis(decision, best[..., None], True, axis=-1)
        return Guess(attack=self.name, score=score, decision=decision & (shown >= 0))


class ForgetfulLaplace:
    """Local Laplace noise that *declares* the usual mechanism -- clip the update to L1 norm
    ``sensitivity / 2``, add Laplace(``sensitivity / eps``) per coordinate -- and claims ``eps``,
    but forgets to clip. The declaration is all the worst-case audit needs: it crafts two updates
    beyond the declared clip, and the claim comes out ``violated``."""

    privatizes = "vector"

    def __init__(self, eps: float = 1.0, sensitivity: float = 1.0):
        self.claim = PrivacyClaim(eps, 0.0, "message")
        self.mechanism = mechanisms.Laplace(scale=sensitivity / eps, sensitivity=sensitivity, norm="l1")

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        updates = messages.updates(global_params)  # the clip to sensitivity / 2 is missing here
        noise = rng.laplace(0.0, self.mechanism.scale, size=updates.shape)
        return messages.with_updates(updates + noise, global_params)


class Quantize:
    """Round each coordinate of the update to a multiple of ``step``."""

    privatizes = "vector"  # it transforms a vector message (checked against the algorithm's messages)
    claim = PrivacyClaim()  # no DP guarantee

    def __init__(self, step: float = 0.05):
        if not step > 0:
            raise ValueError(f"step must be positive, got {step}")
        self.step = step

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        updates = messages.updates(global_params)
        return messages.with_updates(np.round(updates / self.step) * self.step, global_params)


def main(rounds: int = 5) -> fltr_audit.AuditResult:
    fltr_audit.register_attack("dot", lambda: DotAttack())
    fltr_audit.register_defense("quantize", Quantize, guarantee="none (coarser messages, no DP claim)")
    fltr_audit.register_defense("forgetful-laplace", ForgetfulLaplace, guarantee="eps-DP per message (as declared)")
    result = fltr_audit.audit(data="synthetic:mq2008", algo="fpdgd", train_rounds=rounds, clients=200,
                              attacks=["dot", "olsr", "random3"],
                              defenses=["none", "quantize(step=0.5)", "forgetful-laplace(eps=1)"],
                              click_models=["informational"], seeds=[0], trials=2000)
    result.summary()
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="FPDGD pre-training rounds")
    main(parser.parse_args().rounds)
