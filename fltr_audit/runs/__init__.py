"""Running specs: one audit run (``audit``), the whole-run canary audit (``whole_run``), the
campaign runner (``campaign``), the executors every fan-out goes through (``executors``) and
interruptions (``interrupts``). The composition root: it wires the engine to ``attacks``,
``defenses`` and ``reports``."""
