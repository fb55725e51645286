"""The noise model a Bayes attack needs, read from the mechanisms a defense stack declares."""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.bayes_noise import ClipStep, NoiseModel
from defenses.stack import DefenseStack
from fltr_audit.constraints import ParameterError
from fltr_audit.engine.interfaces import PrivacyClaim
from fltr_audit.privacy import mechanisms as mech


def noise_model(stack: DefenseStack, members: int = 1) -> Any:
    """The ``attacks.bayes_noise.NoiseModel`` of a defense stack, read from the mechanisms its parts
    declare (``fltr_audit.privacy.mechanisms``): its clipping steps in order and its one noise mechanism
    (ParameterError naming ``attacks`` when ``bayes`` has no likelihood for the defense, or it declares nothing).

    The aggregators that add noise are mapped for the one case ``bayes`` attacks an aggregate:
    the target's update alone in it (a probe cohort of one, or ``server-malicious`` isolation,
    where ``attacks.view.client_updates`` multiplies the mean by the cohort's n and subtracts
    the others' zero updates), of ``members`` clients in all. Then the attacked update is the
    clipped update plus the noise on the cohort's *sum*:

    * ``AggregatorGaussian`` (dp-fedavg): clip ``C`` (L2, of the update) and N(0, (z_D C)^2) per
      coordinate; adaptive clipping is refused (the clip moves every round);
    * ``DiscreteGaussianSum`` (ddgauss): clip ``C``, then a Gaussian approximation
      (``defenses.ddgauss.decoded_noise_std``).

    ``Shuffle`` is refused: the server gets the messages without senders and cannot link one to
    the list it was shown on.
    """

    clips: list = []
    noise: dict = {}
    two = ParameterError("attacks", f"bayes: defense {stack.name!r} stacks two noise mechanisms; bayes has a "
                         "likelihood for one")
    for d in stack.client:
        m = mech.declared(d)
        if isinstance(m, mech.Clipping):
            clips.append(ClipStep(m.bound, m.of, m.norm))
            continue
        if noise:
            raise two
        if isinstance(m, mech.GammaShares):
            clips.append(ClipStep(m.sensitivity / 2, m.of, "l2"))
            noise = {"kind": "gamma-difference", "scale": m.scale}
        elif isinstance(m, mech.Laplace):
            clips.append(ClipStep(m.sensitivity / 2, m.of, m.norm))
            noise = {"kind": "laplace", "scale": m.scale}
        elif isinstance(m, mech.Gaussian):
            clips.append(ClipStep(m.clip, "update", "l2"))
            noise = {"kind": "gaussian", "scale": m.std}
        elif isinstance(m, mech.RandomizedResponse):
            noise = {"kind": "rr", "scale": m.p, "values": tuple(float(v) for v in m.values)}
        else:
            raise ParameterError("attacks", f"bayes: defense {d.name!r} declares no mechanism bayes has a likelihood for "
                                            "(declare one of fltr_audit.privacy.mechanisms: Clipping, Laplace, Gaussian, GammaShares, "
                                            "RandomizedResponse)")
    agg = stack.aggregator
    m = mech.declared(agg)
    if isinstance(m, mech.Shuffle):
        raise ParameterError("attacks", f"bayes: defense {stack.name!r} shuffles the messages, so the server cannot "
                                        "link a message to the list it was shown on")
    if isinstance(m, mech.AGGREGATOR_NOISE):
        if noise:
            raise two
        if isinstance(m, mech.AggregatorGaussian) and m.adaptive:
            raise ParameterError("attacks", f"bayes: defense {stack.name!r} adapts its clip norm every round "
                                            "(quantile > 0); bayes needs the fixed clip (quantile=0)")
        clips.append(ClipStep(m.clip, "update", "l2"))
        if isinstance(m, mech.AggregatorGaussian):
            std = m.std_multiplier * m.clip
        else:
            # start-up: defenses.ddgauss loads cryptography (0.05 s CPU an audit process); only a ddgauss stack gets here
            from defenses.ddgauss import decoded_noise_std

            std = decoded_noise_std(agg, members)
        noise = {"kind": "gaussian", "scale": std}
    elif m is None and np.isfinite(getattr(agg, "claim", PrivacyClaim()).epsilon):
        raise ParameterError("attacks", f"bayes: aggregator {agg.name!r} claims an epsilon but declares no mechanism, so "
                                        "bayes has no likelihood for it")
    return NoiseModel(clips=tuple(clips), defense=stack.name, **noise)
