"""What can be used by name: every attack, algorithm and defense -- built-in, registered in this
process, and installed plug-ins (with their distribution, version and entry point) -- as rows
(``fltr-audit attacks list``, ``algorithms list``, ``defenses list``). An installed plug-in no
command of this process has used is listed from its package's metadata, never imported
(``fltr_audit.plugins.installed_plugins``)."""

from __future__ import annotations

from fltr_audit import plugins


def origins(group: str) -> dict[str, dict]:
    """The installed plug-ins of ``group`` by name: the distribution that declares each, its version
    and the entry point's ``module:attr`` (``plugins.installed_plugins``: metadata only)."""
    return {p.name: {"distribution": p.distribution, "version": p.version, "entry_point": p.target}
            for p in plugins.installed_plugins(group)}


def with_origins(group: str, rows: list[dict], blank: dict) -> list[dict]:
    """``rows`` (registered entries) with their origin columns ("" for built-ins), then a row per
    installed plug-in no command of this process has used: listed, never imported (the other
    columns ``blank``)."""
    found = origins(group)
    none = {"distribution": "", "version": "", "entry_point": ""}
    known = {row["name"] for row in rows}
    return ([{**row, **found.get(row["name"], none), "imported": True} for row in rows]
            + [{"name": name, **blank, "summary": plugins.NOT_IMPORTED, **origin, "imported": False}
               for name, origin in found.items() if name not in known])


def attack_rows() -> list[dict]:
    """Every attack, built-in, registered and installed (plug-ins with their distribution; those no
    command has used are listed unimported): what it does, whether it is a reference baseline, and
    what it needs (kind ``privacy``); then the poisoning attacks (kind ``poisoning``: the message kinds
    they can be written in, their parameters)."""
    # start-up: each listing loads only its registry
    from attacks.poisoning.catalog import list_poisonings
    from attacks.registry import attack_names, attack_spec

    rows = [{"name": name, "kind": "privacy", "summary": attack_spec(name).summary,
             "reference": attack_spec(name).reference, "needs": list(attack_spec(name).needs)}
            for name in attack_names()]
    poisoning = [{**row, "reference": False, "needs": [], "distribution": "", "version": "", "entry_point": "",
                  "imported": True} for row in list_poisonings()]
    return with_origins(plugins.ATTACKS, rows, {"kind": "privacy", "reference": False, "needs": []}) + poisoning


def algorithm_rows() -> list[dict]:
    """Every algorithm, built-in, registered and installed (plug-ins with their distribution; those
    no command has used are listed unimported), with its declared capabilities and parameters."""
    from fltr_audit.engine.algorithms.registry import algorithm_specs  # start-up: as above

    rows = [{"name": s.name, "summary": s.summary, "auditable": s.auditable, "message_kind": s.message_kind,
             "reveals": s.reveals, "click_models": s.click_models, "probe_click_models": list(s.probe_click_models()),
             "train_click_model": s.train_click_model, "default_normalization": s.default_normalization,
             "default_attacks": list(s.default_attacks), "k": s.k, "unlearning": list(s.unlearning),
             "params": None if s.params is None else [{"name": p.name, "default": p.default, "help": p.help}
                                                       for p in s.params]} for s in algorithm_specs()]
    return with_origins(plugins.ALGORITHMS, rows, {
        "auditable": False, "message_kind": "none", "reveals": plugins.NOT_IMPORTED, "click_models": "",
        "probe_click_models": [],
        "train_click_model": "", "default_normalization": "", "default_attacks": [], "k": 0, "unlearning": [],
        "params": None})


def defense_rows() -> list[dict]:
    """Every defense with its role, parameters, defaults, summary, claimed guarantee and origin; a
    plug-in no command has used is listed unimported, its guarantee shown once it is used."""
    from defenses.listing import list_defenses  # start-up: as above

    return with_origins(plugins.DEFENSES, list_defenses(), {"role": "", "guarantee": plugins.NOT_IMPORTED,
                                                             "parameters": [], "default_claim": None, "sees": ""})
