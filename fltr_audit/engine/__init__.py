"""The simulation engine: data sets, click models, rankers, metrics, the federated algorithms, the
federation loop with its message interception, the probe, populations, random streams and the
compiled kernels; and the small protocols (``interfaces``) that ``attacks`` and ``defenses``
implement. It imports neither of them, nor ``reports`` (``tests/test_layers.py``)."""
