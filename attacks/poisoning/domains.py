"""The finite domains of the poisoning attacks' parameters and of the messages they write, without
numpy (the catalog lists the attacks unimported)."""

from __future__ import annotations

VECTOR_KINDS = ("weights", "update")
"""Message kinds a vector attack writes."""
ALL_KINDS = VECTOR_KINDS + ("seed+metric",)
"""Every message kind (FOLtR-ES's seed and metric values included)."""
DIRECTIONS = ("std", "unit", "sign")
"""Perturbation directions of the adaptive attack (Shejwalkar & Houmansadr)."""
CLICKS = ("inverted", "navigational", "informational", "pbm")
"""Click models malicious users can click by (data poisoning)."""
WHO = ("fixed", "round")
"""How malicious members are chosen: the same users whenever they take part, or afresh each round."""
