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
import matplotlib
import pandas as pd
from markupsafe import Markup

from reports import plots, sections
from reports.compare import check_min_effect, compare, verdicts
from reports.leakage import MIN_EFFECT
from reports.methods import configuration, methods as methods_items, versions
from reports.glossary import TERMS, anchor, lookup
from reports.style import legend_png
from reports.summary import defense_summary, scope_line
from reports.sweep_plot import sweep_plots
from reports.sweeps import with_sweeps
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
    env.filters["term"] = _term_anchor
    return env


def _term_anchor(label: str) -> str:
    """The report's glossary anchor of the term a badge or header names ("" when none)."""
    term = lookup(str(label).split(": ")[-1])
    return f"g-{anchor(term.name)}" if term is not None else ""


def _md(value) -> Markup:
    """Markdown-safe text: HTML metacharacters as entities (no raw HTML gets through a
    Markdown renderer), table pipes escaped, one line; quotes stay readable."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(text.replace("|", "\\|").replace("\n", " "))


def _uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def _plots(tables, table, v, min_effect: float) -> tuple[dict[str, bytes | str], list[dict]]:
    """The plot files and their template entries: the one legend, each sweep (with the sentence
    saying what it shows), then :data:`reports.plots.PLOTS`."""
    files: dict[str, bytes | str] = {}
    # Titles at a fixed height (no figure has ticks or labels above its panels): matplotlib otherwise
    # measures every axis on each draw to clear them, 5 % of a report, for the same pixels.
    with matplotlib.rc_context({"axes.titley": 1.0}):
        legend = legend_png(tables)
        drawn = [(f"sweep_{i + 1}", s["title"], s["caption"], s["png"])
                 for i, s in enumerate(sweep_plots(tables, v, min_effect))]
        drawn += [(name, plot_title, caption, draw(tables, table))
                  for name, (plot_title, caption, draw) in plots.PLOTS.items()]
    if legend is not None:
        files["plots/legend.png"] = legend
    shown = []
    for name, plot_title, caption, png in drawn:
        if png is None:
            continue
        files[f"plots/{name}.png"] = png
        shown.append({"title": plot_title, "caption": caption, "uri": _uri("image/png", png),
                      "file": f"plots/{name}.png"})
    return files, shown


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
    tables, swept = with_sweeps(tables)  # every swept axis a column: nothing below pools over it
    runs = tables.get("runs", pd.DataFrame())
    table = compare(tables, min_effect=min_effect)
    if not table.empty:
        table = ordered(table, ("defense", "data", "algo", *swept, "click_model", "threat_model"))
    v = verdicts(tables, min_effect=min_effect)
    files, shown_plots = _plots(tables, table, v, min_effect)
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
        "legend": _uri("image/png", files["plots/legend.png"]) if "plots/legend.png" in files else None,
        "methods": methods_items(tables, methods, min_effect),
        "glossary": [(f"g-{anchor(t.name)}", t.name, t.text) for t in TERMS],
        "versions": versions(runs),
        "configuration": configuration(runs),
    }
    env = _environment()
    files["report.html"] = env.get_template("report.html.j2").render(context)
    files["report.md"] = env.get_template("report.md.j2").render(context)
    return files
