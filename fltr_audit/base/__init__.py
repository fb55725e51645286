"""Vocabulary below the engine that is not a parameter's: atomic writes (``atomic``), the machine's
memory budget for one input (``resources``), the words defenses are described in
(``defense_terms``) and reading a ``.npz`` file nobody vouches for
(``untrusted_npz``)."""
