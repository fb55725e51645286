"""DP-FedAvg plug-ins broken on purpose, for the claim-verdict controls over a run: each keeps
dp-fedavg's claim and ``dp_event`` while its aggregation is not what the claim accounts for."""

import numpy as np

from defenses.dp_fedavg import DPFedAvg, clip_updates
from fltr_audit.engine.interfaces import Aggregate


class BrokenFedAvg(DPFedAvg):
    """The cohort's updates, clipped to ``clip`` unless ``clips`` is False, summed, plus Gaussian
    noise of std ``noise_scale`` x ``noise_multiplier`` x ``clip``, over the cohort size."""

    clips = True
    noise_scale = 1.0

    def aggregate(self, messages, participants, rng, global_params=None):
        g = np.zeros(messages.vector.shape[1]) if global_params is None else global_params
        updates = messages.updates(g)
        total = (clip_updates(updates, self.clip) if self.clips else updates).sum(axis=0)
        noisy = (total + rng.normal(0.0, self.noise_scale * self.noise_multiplier * self.clip, total.shape)) / len(updates)
        mean = noisy + g if messages.vector_kind == "weights" else noisy
        return Aggregate(mean=mean, participants=np.asarray(participants), dropouts=np.empty(0, np.int64),
                         messages=None)


class NoClipFedAvg(BrokenFedAvg):
    """Broken: the updates are summed unclipped."""

    clips = False


class HalfNoiseFedAvg(BrokenFedAvg):
    """Broken: the noise is drawn with half the multiplier."""

    noise_scale = 0.5
