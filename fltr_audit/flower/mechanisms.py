"""Flower's own privacy mechanisms as the project's defenses, so the project's audits (leakage
verdicts on probes, worst-case claim audits) run on them exactly as deployed.

Each adapter runs Flower's code, not a re-implementation: ``LocalDpMod``'s clip-and-noise
functions and noise formula; the DP strategy wrappers' own objects (their clipping helpers and
their ``_noisy_fraction`` / ``_geometric_update`` / ``_add_noise_to_aggregated_arrays`` methods, in
the order ``aggregate_train`` calls them); SecAgg+'s ``quantize`` / ``factor_combine`` / modular sum /
``factor_extract`` / ``dequantize`` with the workflow's parameters (the pairwise and private masks
cancel exactly in the modular sum and are left out). Flower draws its noise from numpy's global
generator; each call seeds it from the round's stream and restores it, so runs stay reproducible.

Each declares what it does as a mechanism value (``fltr_audit.privacy.mechanisms``) -- ``Gaussian`` for
``LocalDpMod`` (its real std on the update clipped to its real norm, whatever ``sensitivity`` it
was calibrated with), ``AggregatorGaussian`` for the DP wrappers (the wrapper's effective
multiplier), ``QuantizedSum`` for SecAgg+ -- and the worst-case audits and the accountant read
that declaration, as for every in-tree defense.

Registered as defense-string components (``register``, or the ``fltr_audit.defenses`` entry points of
the installed distribution): ``flwr-localdp(clip, sensitivity, epsilon,
delta)``, ``flwr-dp(noise_multiplier, clip, side, adaptive, quantile, lr, count_std, dp_delta)`` and
``flwr-secaggplus(clipping_range, quantization_range, modulus_range, max_weight)``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

import numpy as np
from flwr.clientapp.mod import LocalDpMod
from flwr.common.logger import FLOWER_LOGGER
from flwr.common.secure_aggregation.ndarrays_arithmetic import factor_combine, factor_extract, parameters_mod
from flwr.common.secure_aggregation.quantization import dequantize, quantize
from flwr.serverapp.strategy import (DifferentialPrivacyServerSideAdaptiveClipping,
                                     DifferentialPrivacyServerSideFixedClipping, FedAvg)
from flwr.supercore.differential_privacy import (adaptive_clip_inputs_inplace, add_gaussian_noise_inplace,
                                                 compute_adaptive_noise_params, compute_clip_model_update,
                                                 compute_stdv)

from defenses.dp_gaussian import gaussian_epsilon
from defenses.mechanism_events import dp_event
from defenses.registration import register_defense
from defenses.stack import SPECS
from fltr_audit.privacy import mechanisms as mech
from fltr_audit.errors import FltrError
from fltr_audit.engine.interfaces import Aggregate, AggregatorBase, PrivacyClaim
from fltr_audit.engine.messages import Messages


@contextlib.contextmanager
def flower_noise(rng: np.random.Generator) -> Iterator[bool]:
    """numpy's global generator (Flower's noise source) seeded from ``rng``, restored after; yields
    False when ``rng`` is not a ``numpy.random.Generator`` -- the audits' noise-free stand-in
    (``attacks.stack_outputs._NoNoise``, whose every draw is zero): the caller then adds no noise.
    Flower's INFO log is held back meanwhile: its DP wrappers log one line per aggregate, which a
    20,000-trial audit would print 20,000 times (and spend most of its time writing)."""
    saved, level = np.random.get_state(), FLOWER_LOGGER.level
    noisy = isinstance(rng, np.random.Generator)
    if noisy:
        np.random.seed(int(rng.integers(2**32)))
    FLOWER_LOGGER.setLevel(max(level, logging.WARNING))
    try:
        yield noisy
    finally:
        np.random.set_state(saved)
        FLOWER_LOGGER.setLevel(level)


class FlowerLocalDp:
    """``flwr-localdp``: Flower's ``LocalDpMod(clipping_norm, sensitivity, epsilon, delta)`` on each
    client's reply: the update clipped to L2 norm ``clip``, then N(0, std^2) per coordinate with
    ``std = sensitivity sqrt(2 ln(1.25 / delta)) / epsilon`` (the classical Gaussian mechanism, Dwork &
    Roth Thm A.1, stated for epsilon < 1). The noise does not depend on ``clip``: the mechanism's L2
    sensitivity is 2 clip (two clipped updates) whatever ``sensitivity`` says.

    Declared: ``Gaussian(std, clip)``, what the mod does (its std, its clipping norm); the accountant
    and the worst-case audit therefore charge the 2 clip spread, not Flower's ``sensitivity``.
    Claim, as Flower documents it: (epsilon, delta)-DP for each client's message."""

    privatizes = "vector"
    role = "client"  # for the fltr_audit.defenses entry point
    guarantee = "(epsilon, delta)-DP per message, as Flower states"
    summary = "Flower's LocalDpMod: clip the update, add Gaussian noise of the classical formula"

    def __init__(self, clip: float = 1.0, sensitivity: float = 1.0, epsilon: float = 1.0, delta: float = 1e-5,
                 name: str = "flwr-localdp"):
        self.mod = LocalDpMod(clip, sensitivity, epsilon, delta)  # Flower validates the parameters
        self.clip, self.name = float(clip), name
        self.std = self.mod.sensitivity * np.sqrt(2 * np.log(1.25 / self.mod.delta)) / self.mod.epsilon
        self.sensitivity = float(self.mod.sensitivity)
        """The L2 sensitivity Flower calibrates its noise on (its ``sensitivity`` argument)."""
        self.claim = PrivacyClaim(epsilon=float(epsilon), delta=float(delta), scope="message")
        self.zero_updates = 0
        """Rows whose update was zero: Flower's ``LocalDpMod`` raises ZeroDivisionError on them (its
        clip divides by the norm); here they pass unclipped (they are within any clip) and are counted."""

    @property
    def mechanism(self) -> mech.Gaussian:
        """Declared: N(0, std^2) on the update clipped to L2 norm ``clip`` (sensitivity 2 clip), and
        the ``sensitivity`` Flower calibrated the std on (not tied to the clip)."""
        return mech.Gaussian(self.std, self.clip, self.sensitivity)

    def dp_event(self):
        """One round, from the declaration: ``GaussianDpEvent(std / (2 clip))``."""
        return dp_event(self.mechanism, self.claim)

    def apply(self, messages: Messages, global_params: np.ndarray, rng: np.random.Generator) -> Messages:
        if messages.vector is None:
            raise FltrError(f"{self.name}: needs vector messages (weights or updates)")
        g = np.asarray(global_params, dtype=np.float64)
        out = np.empty_like(messages.vector, dtype=np.float64)
        with flower_noise(rng) as noisy:
            for i, w in enumerate(messages.weights(g)):
                arrays = [np.array(w, dtype=np.float64)]
                try:
                    compute_clip_model_update(arrays, [g], self.mod.clipping_norm)
                except ZeroDivisionError:  # Flower divides by the update's norm: a zero update crashes it
                    self.zero_updates += 1
                add_gaussian_noise_inplace(arrays, self.std if noisy else 0.0)
                out[i] = arrays[0]
        return messages.with_weights(out, g)


class FlowerCentralDp(AggregatorBase):
    """``flwr-dp``: Flower's central DP strategy wrappers, fixed or adaptive clipping, with clipping
    on the client (``side=client``: ``fixedclipping_mod`` / ``adaptiveclipping_mod``, the server sees
    the clipped updates) or on the server (``side=server``: the server sees the raw updates and clips
    them). The server averages (uniform weights, as the wrappers require) and adds N(0, (z' C / m)^2)
    with Flower's ``compute_stdv``, z' the wrapper's effective multiplier (z, or with adaptive
    clipping ``(z^-2 - (2 count_std)^-2)^-1/2``); the adaptive wrapper updates C by its noisy
    clipped fraction *before* adding the round's noise, as ``aggregate_train`` does.

    Declared: ``AggregatorGaussian(z, z', C)`` (``adaptive``: C is the initial clip), z' from
    Flower's ``compute_adaptive_noise_params`` for cohorts of ``cohort`` (Flower's default
    ``count_std`` is cohort / 20, so adaptive clipping needs ``count_std`` or ``cohort``).
    Claim, as Flower documents it: central DP of the released model, Gaussian mechanism of
    multiplier z with add/remove-one-client neighbours, scope ``aggregate``; nothing is claimed
    against the server itself, which reads every reply."""

    reads_global_model = True
    role = "aggregator"
    guarantee = "central DP of the released model (Gaussian, multiplier z), as Flower states"
    summary = "Flower's DP strategy wrappers (client- or server-side, fixed or adaptive clipping)"

    def __init__(self, noise_multiplier: float = 1.0, clip: float = 1.0, side: str = "client",
                 adaptive: bool = False, quantile: float = 0.5, lr: float = 0.2, count_std: float = 0.0,
                 cohort: int = 0, dp_delta: float = 1e-5, name: str = "flwr-dp"):
        if side not in ("client", "server"):
            raise FltrError(f"{name}: side must be client or server, got {side!r}")
        self.noise_multiplier, self.initial_clip, self.side = float(noise_multiplier), float(clip), side
        self.adaptive, self.quantile, self.lr = bool(adaptive), float(quantile), float(lr)
        self.count_std, self.cohort, self.dp_delta, self.name = float(count_std), int(cohort), float(dp_delta), name
        if not (self.noise_multiplier > 0 and np.isfinite(self.noise_multiplier)):
            raise FltrError(f"{name}: noise_multiplier must be a positive number, got {noise_multiplier}")
        if self.adaptive and not (self.count_std > 0 or self.cohort > 0):
            raise FltrError(f"{name}: adaptive clipping needs count_std, or cohort (Flower's default count_std "
                            "is cohort / 20)")
        self.update_multiplier = self.noise_multiplier
        """z': the multiplier of the noise on the sum (z with fixed clipping)."""
        if self.adaptive:
            try:
                _, self.update_multiplier = compute_adaptive_noise_params(self.noise_multiplier, self.cohort,
                                                                          self.count_std or None)
            except ValueError as exc:  # Flower's own check: count_std <= z / 2
                raise FltrError(f"{name}: {exc}") from None
        self._wrappers: dict[int, object] = {}
        self.zero_updates = 0  # updates of norm 0, on which Flower's clipping raises ZeroDivisionError
        self.claim = PrivacyClaim(epsilon=gaussian_epsilon(self.dp_delta, 1.0, self.noise_multiplier),
                                  delta=self.dp_delta, scope="aggregate")

    def __copy__(self) -> "FlowerCentralDp":  # a fresh wrapper: adaptive clipping keeps state per copy
        return FlowerCentralDp(self.noise_multiplier, self.initial_clip, self.side, self.adaptive, self.quantile,
                               self.lr, self.count_std, self.cohort, self.dp_delta, self.name)

    @property
    def mechanism(self) -> mech.AggregatorGaussian:
        """Declared: N(0, (z' C)^2) on the sum of the updates clipped to C (the initial C if adaptive)."""
        return mech.AggregatorGaussian(self.noise_multiplier, self.update_multiplier, self.initial_clip,
                                       self.adaptive)

    def dp_event(self):
        """One round for one participating client, from the declaration: ``GaussianDpEvent(z)``."""
        return dp_event(self.mechanism, self.claim)

    @property
    def clip(self) -> float:
        return float(self._wrappers[next(iter(self._wrappers))].clipping_norm) if self._wrappers else self.initial_clip

    def wrapper(self, m: int):
        """Flower's wrapper for cohorts of ``m`` (``num_sampled_clients``), made once and kept."""
        if m not in self._wrappers:
            if self.adaptive:
                self._wrappers[m] = DifferentialPrivacyServerSideAdaptiveClipping(
                    FedAvg(), self.noise_multiplier, m, initial_clipping_norm=self.initial_clip,
                    target_clipped_quantile=self.quantile, clip_norm_lr=self.lr,
                    clipped_count_stddev=self.count_std or None)
            else:
                self._wrappers[m] = DifferentialPrivacyServerSideFixedClipping(FedAvg(), self.noise_multiplier,
                                                                              self.initial_clip, m)
        return self._wrappers[m]

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator,
                  global_params: np.ndarray | None = None) -> Aggregate:
        if messages.vector is None:
            raise FltrError(f"{self.name}: needs vector messages (weights or updates)")
        g = np.zeros(messages.vector.shape[1]) if global_params is None else np.asarray(global_params, np.float64)
        updates = messages.updates(g)
        m = self.cohort or messages.n_clients
        wrapper = self.wrapper(m)
        clip = float(wrapper.clipping_norm)
        with flower_noise(rng):
            clipped, count = np.empty_like(updates), 0
            for i, u in enumerate(updates):
                arrays = [u.copy()]
                try:
                    count += int(adaptive_clip_inputs_inplace(arrays, clip))  # clips; True when it had to
                except ZeroDivisionError:  # a zero update (Flower divides by its norm): within the clip
                    self.zero_updates += 1
                clipped[i] = arrays[0]
            if self.adaptive:
                wrapper._geometric_update(wrapper._noisy_fraction(count, len(updates)))
            # what the wrapper's _add_noise_to_aggregated_arrays does, without its ArrayRecord round trip
            # (3 ms a call, most of a 20,000-trial audit): Flower's compute_stdv, Flower's noise
            mean = clipped.mean(axis=0)
            add_gaussian_noise_inplace([mean], compute_stdv(wrapper.noise_multiplier, wrapper.clipping_norm,
                                                            wrapper.num_sampled_clients))
        seen = messages.with_updates(clipped, g) if self.side == "client" else messages
        return Aggregate(mean=mean + g if messages.vector_kind == "weights" else mean,
                         participants=np.asarray(participants), dropouts=np.empty(0, dtype=np.int64), messages=seen,
                         stats={"clip": clip, "next_clip": float(wrapper.clipping_norm),
                                "clipped_fraction": count / len(updates)})


class FlowerSecAggPlus(AggregatorBase):
    """``flwr-secaggplus``: Flower's SecAgg+ arithmetic as configured in ``SecAggPlusWorkflow``. Each
    client scales its parameters by ``dq = round(n_c / max_weight * Q) / Q``, clips them to
    [-clipping_range, clipping_range], quantizes stochastically to [0, Q) (Q = quantization_range)
    and appends its weight factor; the server sums modulo ``modulus_range``, extracts the factors,
    dequantizes and rescales. The server sees only that aggregate. Declared: ``QuantizedSum`` with
    the workflow's ranges. No DP claim."""

    sees = "sum"

    role = "aggregator"
    guarantee = "none (no DP claim)"
    summary = "Flower's SecAgg+ quantized modular sum: the server sees the aggregate only"

    def __init__(self, clipping_range: float = 8.0, quantization_range: int = 4194304,
                 modulus_range: int = 4294967296, max_weight: float = 1000.0, name: str = "flwr-secaggplus"):
        if not modulus_range > quantization_range > 0 or modulus_range & (modulus_range - 1):
            raise FltrError(f"{name}: modulus_range must be a power of 2 above quantization_range")
        self.clipping_range, self.q, self.m = float(clipping_range), int(quantization_range), int(modulus_range)
        self.max_weight, self.name = float(max_weight), name
        self.claim = PrivacyClaim()

    @property
    def mechanism(self) -> mech.QuantizedSum:
        """Declared: the modular sum of the clipped, quantized values, nothing else released."""
        return mech.QuantizedSum(self.clipping_range, self.q, self.m)

    def aggregate(self, messages: Messages, participants: np.ndarray, rng: np.random.Generator) -> Aggregate:
        if messages.vector is None:
            raise FltrError(f"{self.name}: needs vector messages (weights or updates)")
        total = None
        with flower_noise(rng):
            for vector, n_c in zip(messages.vector, messages.n_interactions):
                q_ratio = round(float(n_c) / self.max_weight * self.q)
                scaled = [np.asarray(vector, dtype=np.float64) * (q_ratio / self.q)]
                share = factor_combine(q_ratio, quantize(scaled, self.clipping_range, self.q))
                share = [a.astype(np.int64) for a in share]  # as after adding the (int64) masks
                total = share if total is None else [a + b for a, b in zip(total, share)]
        total = parameters_mod(total, self.m)
        q_total, values = factor_extract(total)
        (mean,) = dequantize(values, self.clipping_range, self.q)
        mean = (mean - (messages.n_clients - 1) * self.clipping_range) * (self.q / q_total)
        return Aggregate(mean=np.asarray(mean, dtype=np.float64), participants=np.asarray(participants),
                         dropouts=np.empty(0, dtype=np.int64), messages=None)


def register() -> None:
    """Make ``flwr-localdp``, ``flwr-dp`` and ``flwr-secaggplus`` usable in defense strings."""

    if "flwr-localdp" in SPECS:
        return
    for name, cls in (("flwr-localdp", FlowerLocalDp), ("flwr-dp", FlowerCentralDp),
                      ("flwr-secaggplus", FlowerSecAggPlus)):
        register_defense(name, cls, role=cls.role, guarantee=cls.guarantee, summary=cls.summary)

