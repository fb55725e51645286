"""What a defense stack does to a client's message, as the Bayes attacks need it for their
likelihood (``attacks.bayes_likelihoods``): the clipping steps in the client's order and the
noise kind and scale. Built from a defense stack by the composition root
(``fltr_audit.runs.audit.noise_model``)."""

from __future__ import annotations

from dataclasses import dataclass

from fltr_audit.constraints import ParameterError

NOISE_KINDS = ("none", "laplace", "gaussian", "gamma-difference", "rr")


@dataclass(frozen=True)
class ClipStep:
    """One clipping transform of the client: scale to norm ``bound`` (``norm`` l1 | l2) the
    ``of`` = "weights" (FPDGD Alg. 3) or the "update"."""

    bound: float
    of: str = "weights"
    norm: str = "l2"


@dataclass(frozen=True)
class NoiseModel:
    """What the defense stack does to a message, as the attack needs it for its likelihood.

    Attributes
    ----------
    kind : {"none", "laplace", "gaussian", "gamma-difference", "rr"}
    scale : float
        Laplace scale b, Gaussian std, Gamma scale lambda, or rr's keep probability p.
    clips : tuple of ClipStep
        The clipping transforms in the order the client applies them (before the noise).
    cohort : int
        n of the Gamma(1/n, lambda) shares; 0 = the round's cohort (participants + dropouts).
    values : tuple of float
        The randomized-response domain (rr only).
    defense : str
        The defense stack's name (for messages).
    """

    kind: str = "none"
    scale: float = 0.0
    clips: tuple[ClipStep, ...] = ()
    cohort: int = 0
    values: tuple[float, ...] = ()
    defense: str = "none"

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise ParameterError("attacks", f"bayes: no likelihood for defense {self.defense!r} "
                                            f"(supported noise: {', '.join(NOISE_KINDS)}, with clip)")

