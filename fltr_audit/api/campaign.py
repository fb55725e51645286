"""``fltr_audit.audit_campaign``: run a campaign (a TOML file, or the same tables as a mapping), in
memory or into a results store -- the ``fltr-audit campaign run`` command as a Python call."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from fltr_audit.api.results import AuditResult
from fltr_audit.api.run_tables import campaign_tables
from fltr_audit.errors import FltrError
from fltr_audit.runs.executors import Executor
from fltr_audit.spec.campaign import CampaignSpec, load_spec, validate_spec


def campaign_spec(path_or_mapping: str | Path | Mapping[str, Any] | CampaignSpec) -> CampaignSpec:
    """The validated campaign of a TOML path, a TOML-shaped mapping or a spec already read."""
    if isinstance(path_or_mapping, CampaignSpec):
        return path_or_mapping
    if isinstance(path_or_mapping, Mapping):
        return validate_spec(dict(path_or_mapping), source="campaign")
    if isinstance(path_or_mapping, (str, Path)):
        return load_spec(path_or_mapping)
    raise FltrError(f"fltr_audit.audit_campaign: expected a TOML path or a mapping, not "
                    f"{type(path_or_mapping).__name__}")


def audit_campaign(path_or_mapping: str | Path | Mapping[str, Any] | CampaignSpec, store: str | Path | None = None,
                   *, workers: int = 1, scheduler: str | None = None) -> AuditResult:
    """Run a campaign (a TOML file, or the same tables as a mapping; the format is described in
    ``fltr_audit.spec.campaign_tables``).

    Without ``store`` the runs are computed and kept in memory; with a store path they are
    recorded there (completed runs are reused) and read back. ``workers`` / ``scheduler``: where
    the runs compute (the same tables on every executor). Plug-ins registered in this process are
    available to runs computed in it (``workers=1``)."""
    spec = campaign_spec(path_or_mapping)
    tables = campaign_tables(spec, None if store is None else Path(store), Executor(workers=workers, scheduler=scheduler))
    return AuditResult(inputs=dict(spec.table), spec=spec, tables=tables)
