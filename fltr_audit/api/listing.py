"""What can be used by name: every attack, algorithm and defense -- built-in, registered in this
process, and installed plug-ins (with their distribution) -- as rows (``fltr-audit attacks list``,
``algorithms list``, ``defenses list``). A broken plug-in is a row saying so, not a failure."""

from __future__ import annotations

from fltr_audit import plugins
from fltr_audit.errors import FltrError


def attack_rows() -> list[dict]:
    """Every attack, built-in, registered and installed (plug-ins with their distribution): what
    it does, whether it is a reference baseline, and what it needs."""
    from attacks.registry import attack_names, attack_spec  # start-up: each listing loads only its registry
    installed = plugins.installed(plugins.ATTACKS)
    names = list(attack_names()) + [n for n in installed if n not in attack_names()]
    rows = []
    for name in names:
        try:
            spec = attack_spec(name)  # loads an installed plug-in
        except FltrError as exc:  # a broken plug-in is a row saying so, not a failed command
            rows.append({"name": name, "summary": str(exc), "reference": False, "needs": [],
                         "distribution": installed.get(name, "")})
            continue
        rows.append({"name": name, "summary": spec.summary, "reference": spec.reference, "needs": list(spec.needs),
                     "distribution": installed.get(name, "")})
    return rows


def algorithm_rows() -> list[dict]:
    """Every algorithm, built-in, registered and installed (plug-ins with their distribution),
    with its declared capabilities and parameters."""
    from fltr_audit.engine.algorithms.registry import algorithm_spec, algorithm_specs  # start-up: as above
    broken = []
    for name, distribution in plugins.installed(plugins.ALGORITHMS).items():
        try:
            algorithm_spec(name)  # loads and registers it
        except FltrError as exc:  # a broken plug-in is a row saying so, not a failed command
            broken.append({"name": name, "summary": str(exc), "auditable": False, "message_kind": "none",
                           "reveals": "", "click_models": "", "probe_click_models": [], "train_click_model": "",
                           "default_normalization": "", "default_attacks": [], "k": 0, "params": None,
                           "distribution": distribution})
    return [{"name": s.name, "summary": s.summary, "auditable": s.auditable, "message_kind": s.message_kind,
             "reveals": s.reveals, "click_models": s.click_models, "probe_click_models": list(s.probe_click_models()),
             "train_click_model": s.train_click_model, "default_normalization": s.default_normalization,
             "default_attacks": list(s.default_attacks), "k": s.k,
             "params": None if s.params is None else [{"name": p.name, "default": p.default, "help": p.help}
                                                       for p in s.params],
             "distribution": s.distribution} for s in algorithm_specs()] + broken


def defense_rows() -> list[dict]:
    """Every defense with its role, parameters, defaults, summary, claimed guarantee and distribution."""
    from defenses.catalog import SPECS  # start-up: as above
    from defenses.registration import plugin_spec
    from defenses.stack import list_defenses

    installed = plugins.installed(plugins.DEFENSES)
    broken = []
    for name in installed:
        if name not in SPECS:
            try:
                plugin_spec(name)  # loads and registers it
            except FltrError as exc:  # a broken plug-in is a row saying so, not a failed command
                broken.append({"name": name, "role": "", "summary": str(exc), "guarantee": str(exc), "parameters": [],
                               "default_claim": None})
    rows = [{**row, "distribution": installed.get(row["name"], "")} for row in list_defenses() + broken]
    return rows
