"""Poisoning attacks: malicious clients of a cohort degrade the trained ranker (an integrity threat,
reported beside the privacy verdicts and never mixed into them). ``catalog`` names them and builds
each fresh for a run from its ``PoisonSpec``; the engine applies them (``fltr_audit.engine.poisoning``)."""
