"""fltr-audit: privacy audit and attack testbed for federated online learning to rank.

The engine: data, click models, rankers, metrics, the federated algorithms, the
federation loop with its message interception, and the interfaces that the
``attacks``, ``defenses`` and ``reports`` packages implement.
"""

__version__ = "0.1.0"
