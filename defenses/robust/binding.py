"""What a run binds to its defense stack before training (the composition root calls ``bind_run``):
fltrust's root set (``fltrust.root_step``, the server's own labelled queries) and, for an algorithm
whose messages carry no vector but can be decoded (FOLtR-ES declares ``decodes_messages``), the
decoder a robust rule reads each client's update with (``message_updates``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from defenses.robust.compose import rule_of
from defenses.robust.fltrust import root_step


def bind_run(stack: Any, algorithm: Any, data: Any, queries_per_client: int, seed: int) -> Any:
    """``stack`` itself, or a copy whose robust aggregator is bound to the run (module docstring)."""
    agg = stack.aggregator
    if rule_of(agg) is not agg:  # no robust rule, or one a composition applies (it reads vectors)
        return stack
    if getattr(type(agg), "needs_server_data", False):
        agg = agg.with_root(root_step(algorithm, data, agg.queries, queries_per_client, seed))
    if getattr(type(algorithm), "decodes_messages", False):
        agg = agg.with_decoder(algorithm.message_updates)
    return stack if agg is stack.aggregator else dataclasses.replace(stack, aggregator=agg)
