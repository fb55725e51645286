"""The audit report as files: ``report.html`` (self-contained), ``report.md``, ``plots/*.png``
and the CSV downloads, returned as ``{relative path: content}`` (the callers write them).

Reading order: a summary (per defense a leakage badge, a claim badge and a paragraph, from
:func:`reports.compare.verdicts`), the plots with captions that say what to read from them
(:data:`reports.plots.PLOTS`), the tables (:data:`reports.sections.SECTIONS`), the methods.
The HTML embeds every plot and CSV as ``data:`` URIs and references nothing outside itself;
jinja2 autoescaping keeps anything read from a data file (doc ids, campaign names, config
strings) from injecting markup into either file.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone

import jinja2
import pandas as pd
from markupsafe import Markup

from reports import plots, sections
from reports.compare import check_min_effect, compare, verdicts
from reports.leakage import MIN_EFFECT
from reports.methods import configuration, methods as methods_items, versions
from reports.summary import defense_summary, scope_line
from reports.tables import ordered


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = _md
    return env


def _md(value) -> Markup:
    """Markdown-safe text: HTML metacharacters as entities (no raw HTML gets through a
    Markdown renderer), table pipes escaped, one line; quotes stay readable."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(text.replace("|", "\\|").replace("\n", " "))


def _uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def render_report(tables: dict[str, pd.DataFrame], *, title: str = "fltr-audit privacy audit",
                  methods: dict | None = None, min_effect: float = MIN_EFFECT) -> dict[str, bytes | str]:
    """The report's files, ``{relative path: content}``: ``report.html``, ``report.md``,
    ``plots/<name>.png`` and the CSV downloads (``compare.csv``, ``verdicts.csv``).

    Parameters
    ----------
    tables : dict of DataFrames
        As :func:`fltr_audit.store.results.load` returns them (missing tables are skipped).
    methods : dict, optional
        Extra or overriding entries of the methods section (name -> text).
    min_effect : float
        The leakage (AUC) below which the upper bound must lie for "no measurable leakage".
    """
    check_min_effect(min_effect)
    runs = tables.get("runs", pd.DataFrame())
    table = compare(tables, min_effect=min_effect)
    if not table.empty:
        table = ordered(table, ("defense", "data", "algo", "click_model", "threat_model"))
    v = verdicts(tables, min_effect=min_effect)
    files: dict[str, bytes | str] = {}
    shown_plots = []
    for name, (plot_title, caption, draw) in plots.PLOTS.items():
        png = draw(tables, table)
        if png is None:
            continue
        files[f"plots/{name}.png"] = png
        shown_plots.append({"title": plot_title, "caption": caption, "uri": _uri("image/png", png),
                            "file": f"plots/{name}.png"})
    results = sections.Results(tables=tables, table=table, verdicts=v)
    shown = []
    for build in sections.SECTIONS:
        made = build(results)
        for section in made if isinstance(made, list) else [made] if made is not None else []:
            download = section.get("download")
            if download is not None:
                files[download["name"]] = download["text"]
                section = {**section, "download": {"name": download["name"], "uri": _uri(
                    "text/csv;charset=utf-8", download["text"].encode("utf-8"))}}
            shown.append(section)
    status = runs.get("status", pd.Series(dtype=object))
    context = {
        "title": title,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n_done": int((status == "done").sum()),
        "n_failed": int((status == "failed").sum()),
        "campaigns": [str(c) for c in runs.get("campaign", pd.Series(dtype=object)).dropna().unique()],
        "scope": scope_line(tables, table, min_effect),
        "summary": defense_summary(v) if not v.empty else [],
        "tables": shown,
        "plots": shown_plots,
        "methods": methods_items(tables, methods, min_effect),
        "versions": versions(runs),
        "configuration": configuration(runs),
    }
    env = _environment()
    files["report.html"] = env.get_template("report.html.j2").render(context)
    files["report.md"] = env.get_template("report.md.j2").render(context)
    return files
