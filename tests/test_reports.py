"""The audit report: renders, self-contained, escapes data, summary derived from tables."""

import base64
import re

import pandas as pd
import pytest

from fltr_audit.cli import main
from fltr_audit.store.results import ResultsStore
from fltr_audit.base.atomic import write_files
from reports import plots
from reports.render import render_report

from synthetic_results import DP, synthetic_runs, synthetic_tables

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>"


def write_report(tables, out, **kwargs):
    """The callers' way: render the files, write them atomically; the HTML report's path."""
    write_files(out, render_report(tables, **kwargs))
    return out / "report.html"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report(synthetic_tables(), out, title="Synthetic audit",
                        methods={"Data": "hand-built synthetic tables"})
    return path, path.read_text(), (out / "report.md").read_text()


def test_render_report_is_pure_and_returns_every_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = render_report(synthetic_tables())
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert {"report.html", "report.md", "compare.csv", "verdicts.csv"} <= set(files)
    assert {f"plots/{name}.png" for name in plots.PLOTS} <= set(files)
    assert all(files[f"plots/{name}.png"].startswith(PNG_MAGIC) for name in plots.PLOTS)


def test_report_renders_html_and_markdown(report):
    path, html, md = report
    assert path.name == "report.html" and path.with_name("report.md").is_file()
    for text in (html, md):
        assert "Privacy-utility comparison" in text and "Methods" in text
        assert "secagg" in text and DP in text
        assert "2^rel - 1" in text and "log2(rank + 1)" in text  # the nDCG convention is stated
        assert "Zero division" in text
        assert "holds" not in text.lower()  # two verdicts, never one word for both
    # the comparison table is there as an HTML table with one body row per (defense, click model, attack)
    first = html.index("Privacy-utility comparison")
    body = html[first:html.index("</table>", first)]
    assert body.count("<tr>") == 1 + 3 * 2 * 2


def test_comparison_rows_of_reference_attacks_read_reference():
    """A reference attack (random-3) reads no message: its report row must not repeat its
    defense's leakage verdict ('none' leaks through olsr, not through random-3)."""
    from reports.compare import compare, verdicts
    from reports.sections import Results, comparison_section
    from reports.tables import HEADERS

    tables = synthetic_tables()
    table = compare(tables, by=("defense",))
    section = comparison_section(Results(tables, table, verdicts(table)))
    attack, verdict = (section["columns"].index(HEADERS.get(c, c)) for c in ("attack", "leakage_verdict"))
    shown = {(row[attack]["t"], row[verdict]["t"]) for row in section["rows"]}
    assert {v for a, v in shown if a == "random-3"} == {"reference"}
    assert "leaks" in {v for a, v in shown if a == "olsr"}


def test_html_is_self_contained(report):
    _, html, _ = report
    assert not re.search(r"https?://", html)
    assert "<link" not in html and "<script" not in html.lower()
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == len(plots.PLOTS) + 1  # and the one legend
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)


def test_markdown_links_written_plot_files(report):
    path, _, md = report
    files = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(files) == len(plots.PLOTS) + 1  # and the one legend
    for f in files:
        assert (path.parent / f).read_bytes().startswith(PNG_MAGIC)


def test_summary_gives_both_verdicts(report):
    _, html, md = report
    sentences = re.findall(r"<li>([^<]*)</li>", html)
    secagg = [s for s in sentences if s.startswith("secagg under")]
    dp = [s for s in sentences if s.startswith(DP)]
    assert len(secagg) == 2 and all("no measurable leakage — largest upper bound olsr" in s for s in secagg)
    assert all("threat model server (aggregate only)" in s for s in secagg)
    assert dp and all("leaks — decided by olsr" in s and "Claimed ε 4.50" in s and "consistent" in s
                      for s in dp)
    assert any(s.startswith("none under threat model server") and "limit of 120,000 trials" in s for s in sentences)


def test_data_strings_are_escaped(tmp_path, monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {})  # plots are pixels; checked above, slow
    t = synthetic_tables()
    t["runs"]["campaign"] = EVIL
    t["attacks"]["data"] = "mq" + EVIL
    t["utility"]["data"] = "mq" + EVIL
    t["epsilon"]["note"] = "doc-" + EVIL
    t["audits"]["claimed_scope"] = '"><img src=x onerror=alert(1)>'
    path = write_report(t, tmp_path, title=EVIL)
    html = path.read_text()
    md = (tmp_path / "report.md").read_text()
    for text in (html, md):
        assert "<script" not in text.lower() and "<img src=x" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert "&amp;lt;" not in text  # escaped once, not twice
    assert "campaign: &lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "doc-&lt;script&gt;" in html  # the epsilon table's extra column made it in, escaped


def test_plots_degrade_when_tables_are_missing():
    t = synthetic_tables()
    assert plots.epsilon_vs_p({**t, "epsilon": pd.DataFrame()}) is None
    assert plots.learning_curves({"curves": pd.DataFrame()}) is None
    assert plots.frontier({"attacks": t["attacks"]}) is None  # no utility: nothing on the x axis
    assert plots.attack_precision_recall({"attacks": t["attacks"]}).startswith(PNG_MAGIC)
    # without a roc table the ROC panels show the stored TPR at 0.1 % / 1 % FPR
    assert plots.roc_curves({"attacks": t["attacks"]}).startswith(PNG_MAGIC)
    assert plots.leakage_forest({"attacks": t["attacks"]}).startswith(PNG_MAGIC)
    bare = t["attacks"].drop(columns=["auc_counterfactual", "leakage", "leakage_normalized"])
    assert plots.roc_curves({"attacks": bare}) is None and plots.leakage_forest({"attacks": bare}) is None


def test_report_without_results_still_renders(tmp_path):
    runs = pd.DataFrame([dict(run_key="k", campaign="c", status="failed", config="{}", env=None,
                              seed=1, seconds=float("nan"), finished_at="t", error="boom <b>")])
    path = write_report({"runs": runs}, tmp_path)
    html = path.read_text()
    assert "No attack results" in html and "boom &lt;b&gt;" in html


def test_cli_report_prints_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {})
    store = ResultsStore(tmp_path / "r.sqlite")
    for r in synthetic_runs()[:4]:
        store.record_run(r["run_key"], "synthetic", r["config"], {"numpy": "9.9"}, r["seed"], 1.0, r["tables"])
    assert main(["report", "--store", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(tmp_path / "out" / "report.html")
    html = (tmp_path / "out" / "report.html").read_text()
    assert "numpy (runs)" in html and "9.9" in html
    # a non-empty folder is refused unless --force; nothing is touched
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()}
    assert main(["report", "--store", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "--force" in err[0]
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out").iterdir()} == before
    assert main(["report", "--store", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "out"), "--force"]) == 0


# --- reading order, summary per defense, compact tables -------------------------------------

def _section(html: str, heading: str) -> str:
    start = html.index(f"<h2>{heading}</h2>")
    end = html.find("<h2>", start + 1)
    return html[start:end if end > 0 else len(html)]


def test_summary_has_one_bullet_per_defense_with_independent_numbers(report):
    _, html, md = report
    t = synthetic_tables()
    bullets = re.findall(r'<li>((?:<(?:span|a) class="badge \w+"[^>]*>[^<]*</(?:span|a)>)+)<strong>([^<]*)</strong> — '
                         r'(.*?)</li>', html)  # a badge that names a glossary term links to it
    assert [b[1] for b in bullets] == ["none", DP, "secagg"]
    badges = {b[1]: re.findall(r'class="badge (\w+)"[^>]*>([^<]*)<', b[0]) for b in bullets}
    assert badges == {"none": [("bad", "leaks"), ("none", "claim: no claim")],
                      DP: [("bad", "leaks"), ("good", "claim (natural neighbours): consistent")],
                      "secagg": [("good", "no measurable leakage"), ("none", "claim: no claim")]}
    pq = t["per_query"].dropna(subset=["auc"])
    for _, defense, text in bullets:
        # the strongest attack's mean per-list leakage per click model, by hand
        for click in ("perfect", "informational"):
            sel = pq[(pq["defense"] == defense) & (pq["click_model"] == click) & (pq["attack"] == "olsr")]
            assert f"{click} clicks (olsr {(sel['auc'] - sel['auc_counterfactual']).mean():+.3f} [" in text
        assert "Under threat model server" in text and "nDCG@10" in text
    text = dict((b[1], b[2]) for b in bullets)
    assert "Claimed ε 4.50 (scope: per round, per client message): consistent" in text[DP]
    assert "leaks above" not in text[DP]  # a defense that leaks: nothing to rule out
    assert "leaks above" in text["secagg"] and "ruled out" in text["secagg"]
    clean = t["utility"][t["utility"]["poison"].isna()]  # rankers trained under poisoning stay out
    util = clean.groupby("defense")["ndcg10_delta"]
    assert f"{util.get_group(DP).groupby(clean['click_model']).mean().min():+.3f}" in text[DP]
    # the Markdown summary says the same, one bullet per defense
    md_bullets = re.findall(r"^- \*\*([^*]+)\*\* · \*\*([^*]+)\*\* · \*\*([^*]+)\*\* — (.*)$", md, flags=re.M)
    assert [b[:3] for b in md_bullets] == [("LEAKS", "CLAIM: NO CLAIM", "none"), ("LEAKS", "CLAIM (NATURAL NEIGHBOURS): CONSISTENT", DP),
                                           ("NO MEASURABLE LEAKAGE", "CLAIM: NO CLAIM", "secagg")]
    assert md_bullets[2][3] == text["secagg"]


def test_mixed_verdicts_name_the_click_models():
    from reports.summary import defense_summary
    nan = float("nan")
    v = pd.DataFrame([dict(defense="d", threat_model="server", click_model=c, leakage_verdict=lv,
                           headline_attack=a, leakage=x, leakage_ci_low=x - 0.01, leakage_ci_high=x + 0.01,
                           missable=x + 0.01, reason="", ndcg10=0.7, ndcg10_delta=-0.01, claim_verdict=cv,
                           claim_text=ct)
                      for c, lv, a, x, cv, ct in (
                          ("perfect", "leaks", "olsr", 0.2, "outside scope",
                           "Claimed ε 4.50 (scope: aggregate): outside the audit's scope"),
                          ("navigational", "inconclusive", "prob", 0.03, "outside scope", ""),
                          ("informational", "no measurable leakage", "olsr", 0.0, "outside scope", ""))])
    (item,) = defense_summary(v)
    assert item["badges"] == [("bad", "leaks"), ("warn", "claim: outside scope")]
    assert ("Under threat model server: leaks with perfect clicks (olsr +0.200 [+0.190, +0.210]); inconclusive "
            "with navigational clicks (prob +0.030 [+0.020, +0.040]); no measurable leakage with "
            "informational clicks (olsr +0.000 [-0.010, +0.010])") in item["text"]
    assert "leaks above 0.040 AUC are ruled out" in item["text"]  # the largest bound where no leak was found
    assert "Utility: nDCG@10 0.700 (-0.010 against no defense)" in item["text"]
    assert "outside the audit's scope" in item["text"]
    v.loc[0, "headline_attack"] = None
    v.loc[0, "reason"] = "no counterfactual scores in the results"
    assert "leaks with perfect clicks: no counterfactual scores in the results" in defense_summary(v)[0]["text"]
    v["headline_attack"], v["leakage_verdict"] = None, "inconclusive"
    v["reason"] = "no counterfactual scores in the results"  # said once for every click model
    assert ("inconclusive with perfect, navigational and informational clicks: no counterfactual scores in "
            "the results.") in defense_summary(v)[0]["text"]


def test_reading_order_summary_plots_tables_methods(report):
    _, html, md = report
    figures = ("Privacy-utility frontier", "Leakage of every attack", "ROC curves", "Learning curves")
    names = ("Summary", *figures, "Leakage by defense and click model", "Privacy-utility comparison",
             "Verdict details", "Epsilon audits", "Methods")
    for text, marks in ((html, ("<h2>{}</h2>", 'alt="{}"')), (md, ("## {}\n", "![{}]"))):
        order = [text.index(marks[1 if n in figures else 0].format(n)) for n in names]
        assert order == sorted(order)
    captions = re.findall(r"<figcaption><b>([^<]*)\.</b> ([^<]*)</figcaption>", html)
    assert captions[0][0] == "Privacy-utility frontier" and len(captions) == len(plots.PLOTS)
    import html as html_lib
    assert [html_lib.unescape(c) for _, c in captions] == [caption for _, caption, _ in plots.PLOTS.values()]
    assert all("Read" in c for _, c in captions)


def test_constant_columns_go_to_the_caption(report):
    _, html, md = report
    detail = _section(html, "Privacy-utility comparison")
    head = re.findall(r"<th>([^<]*)</th>", detail)
    assert head[:7] == ["defense", "click model", "threat model", "attack", "AUC", "AUC counterfactual",
                        "leakage (AUC)"]
    assert "data" not in head and "algo" not in head
    caption = "Same in every row: data = mq2008 · algo = fpdgd · runs = 6 · lists = 114"
    assert caption in detail and caption in md
    # repeated keys are blanked: each defense named once, each (defense, click model) once
    first = [re.findall(r"<td[^>]*>([^<]*)</td>", r)[:2] for r in re.findall(r"<tr>(.*?)</tr>", detail)[1:]]
    assert [d for d, _ in first if d] == ["none", DP, "secagg"]
    assert sum(1 for _, c in first if c) == 3 * 2


def test_leakage_pivot_has_click_model_columns_and_bold_strongest(report):
    _, html, md = report
    t = synthetic_tables()
    pivot = _section(html, "Leakage by defense and click model")
    assert re.findall(r"<th>([^<]*)</th>", pivot) == ["defense", "threat model", "attack", "leakage (perfect)",
                                                        "leakage (informational)"]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", pivot)[1:]]
    assert len(rows) == 3 * 2 and [r[2] for r in rows] == ["olsr", "random-3 (reference)"] * 3
    pq = t["per_query"].dropna(subset=["auc"])
    sel = pq[(pq["defense"] == "secagg") & (pq["attack"] == "olsr") & (pq["click_model"] == "perfect")]
    assert rows[4][3].startswith(f"{(sel['auc'] - sel['auc_counterfactual']).mean():.3f} [")
    # one bold cell (the strongest informed attack: olsr; never the reference) per defense and click model
    bold = re.findall(r'<td class="best[^"]*">([^<]*)</td>', pivot)
    assert len(bold) == 3 * 2 and all(b in (rows[0] + rows[2] + rows[4]) for b in bold)
    assert md.count("| **0.") + md.count("| **-0.") == 3 * 2


def test_epsilon_audit_columns_readers_need_first(report):
    _, html, _ = report
    audits = _section(html, "Epsilon audits")
    head = re.findall(r"<th>([^<]*)</th>", audits)
    assert head[:7] == ["defense", "claim verdict", "claimed ε", "claimed scope", "audited on",
                        "audited ε lower bound", "tightness (lb / claim)"]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", audits)[1:]]
    assert rows[0][:6] == ["none", "no claim", "inf", "none", "message", "ε ≥ 9.70 (limit of 120,000 trials)"]
    assert "verdict" not in [h for h in head if h != "claim verdict"]
    pivot = _section(html, "FOLtR-ES epsilon by enumeration")
    assert re.findall(r"<th>([^<]*)</th>", pivot) == ["p", "ε (perfect)", "ε (informational)", "theoretical bound"]
    assert "levels = 3 · length = 10" in pivot


def test_unbounded_estimates_print_as_inf(tmp_path, monkeypatch):
    import sys
    from reports.compare import fmt_number
    assert fmt_number(sys.float_info.max) == "inf" and fmt_number(float("-inf")) == "-inf"
    assert fmt_number(float("nan")) == "" and fmt_number(0.12345) == "0.123"
    assert fmt_number(2.5e7) == "2.5e+07" and fmt_number(0.000123, significant=True) == "0.000123"
    monkeypatch.setattr("reports.plots.PLOTS", {})
    t = synthetic_tables()
    html = write_report(t, tmp_path).read_text()
    # defense none: no errors at all, so the point estimate from the pooled rates is unbounded
    assert "<td>inf</td>" in _section(html, "Epsilon audits")
    assert "17976931348623157" not in html
    assert "<td>inf</td>" not in _section(html, "Privacy-utility comparison")


def test_csv_downloads_are_embedded_and_written(report):
    path, html, md = report
    links = dict((name, uri) for uri, name in re.findall(r'<a download="[^"]+" href="([^"]+)">([^<]+)</a>', html))
    assert set(links) == {"compare.csv", "verdicts.csv", "robustness.csv"}
    for name, uri in links.items():
        assert uri.startswith("data:text/csv;charset=utf-8;base64,")
        assert base64.b64decode(uri.split(",", 1)[1]) == (path.parent / name).read_bytes()
        assert f"]({name})" in md
    from reports.compare import compare
    table = pd.read_csv(path.parent / "compare.csv")
    assert len(table) == len(compare(synthetic_tables())) and {"precision", "recall", "p_value"} <= set(table)
    assert {"leakage", "leakage_ci_low", "leakage_ci_high", "leakage_verdict", "claim_verdict"} <= set(table)
    verdict_csv = (path.parent / "verdicts.csv").read_text()
    assert "holds" not in verdict_csv.lower() and "leakage_verdict" in verdict_csv


def test_methods_keep_conventions_seeds_configuration(report):
    _, html, md = report
    methods = _section(html, "Methods")
    for item in ("nDCG", "Baseline", "Leakage verdict", "Claim verdict", "Statistics", "Data", "Zero division",
                 "Seeds"):
        assert f"<dt>{item}</dt>" in methods
    assert "Holm" in methods and "counterfactual" in methods and "linear" in methods and "0.05 AUC" in methods
    assert "Configuration" not in methods  # the synthetic runs store an empty config


def test_configuration_groups_runs_by_their_keys(tmp_path, monkeypatch):
    import json
    monkeypatch.setattr("reports.plots.PLOTS", {})
    t = synthetic_tables()
    configs = [json.dumps(dict(r["config"], defense="none")) for r in synthetic_runs()]
    configs[-1] = json.dumps({"kind": "foltr-es epsilon table", "p": [0.5, 0.9]})
    t["runs"]["config"] = configs
    html = write_report(t, tmp_path).read_text()
    md = (tmp_path / "report.md").read_text()
    methods = _section(html, "Methods")
    assert "Configuration: 11 runs" in methods and "Configuration: 1 run (foltr-es epsilon table)" in methods
    assert "<td>rounds</td><td>4</td>" in methods and "<td>fold</td><td>1 | 2</td>" in methods
    assert "<td>p</td><td>[0.5, 0.9]</td>" in methods
    assert "| fold | 1 \\| 2 |" in md


def test_helpers_constants_and_grouping():
    from reports.tables import cell, constants, group_rows
    df = pd.DataFrame({"defense": ["a", "a"], "x": [1, 1], "y": [1, 2]})
    rest, pairs = constants(df, keep=("defense",))
    assert list(rest.columns) == ["defense", "y"] and pairs == [("x", "1")]
    assert constants(df.iloc[:1])[1] == []  # a single row keeps its columns
    rows = group_rows([[cell(a), cell(b), cell(c)] for a, b, c in
                        (("a", "p", 1), ("a", "p", 2), ("a", "q", 3), ("b", "q", 4))], 2)
    assert [[c["t"] for c in r] for r in rows] == [["a", "p", "1"], ["", "", "2"], ["", "q", "3"], ["b", "q", "4"]]
    assert [r[0]["g"] for r in rows] == [False, False, False, True]


def test_epsilon_table_stays_long_when_an_extra_column_varies(tmp_path, monkeypatch):
    monkeypatch.setattr("reports.plots.PLOTS", {})
    t = synthetic_tables()
    t["epsilon"]["note"] = [f"n{i}" for i in range(len(t["epsilon"]))]
    html = write_report(t, tmp_path).read_text()
    section = _section(html, "FOLtR-ES epsilon by enumeration")
    assert re.findall(r"<th>([^<]*)</th>", section) == ["click model", "p", "ε", "theoretical bound", "note"]
    assert section.count("<tr>") == 1 + len(t["epsilon"])


def test_series_label_keeps_algorithms_and_settings_apart():
    from reports.plots import series_label

    frame = pd.DataFrame({"defense": ["none", "none", "secagg", "none"], "algo": ["fedips", "fedavg", "fedips", "fedips"],
                          "setting": ["gamma=0.5", "gamma=0.5", "gamma=0.5", "gamma=2.0"], "data": ["d"] * 4})
    assert list(series_label(frame)) == ["fedips: gamma=0.5: none", "fedavg: gamma=0.5: none",
                                         "fedips: gamma=0.5: secagg", "fedips: gamma=2.0: none"]
    assert list(series_label(frame.iloc[:1])) == ["none"]
