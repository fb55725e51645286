"""The audit report: renders, self-contained, escapes data, summary derived from tables."""

import base64
import re

import pandas as pd
import pytest

from fltr_audit.cli import main
from fltr_audit.store import ResultsStore
from reports import plots
from reports.render import write_report

from synthetic_results import DP, synthetic_runs, synthetic_tables

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path = write_report(synthetic_tables(), out, title="Synthetic audit",
                        methods={"Data": "hand-built synthetic tables"})
    return path, path.read_text(), (out / "report.md").read_text()


def test_report_renders_html_and_markdown(report):
    path, html, md = report
    assert path.name == "report.html" and path.with_name("report.md").is_file()
    for text in (html, md):
        assert "Privacy-utility comparison" in text and "Methods" in text
        assert "secagg" in text and DP in text
        assert "2^rel - 1" in text and "log2(rank + 1)" in text  # the nDCG convention is stated
        assert "Zero division" in text
    # the comparison table is there as an HTML table with one body row per (defense, click model, attack)
    first = html.index("Privacy-utility comparison")
    body = html[first:html.index("</table>", first)]
    assert body.count("<tr>") == 1 + 3 * 2 * 2


def test_html_is_self_contained(report):
    _, html, _ = report
    assert not re.search(r"https?://", html)
    assert "<link" not in html and "<script" not in html.lower()
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == len(plots.PLOTS)
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)


def test_markdown_links_written_plot_files(report):
    path, _, md = report
    files = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(files) == len(plots.PLOTS)
    for f in files:
        assert (path.parent / f).read_bytes().startswith(PNG_MAGIC)


def test_summary_says_which_defenses_hold(report):
    _, html, md = report
    sentences = re.findall(r"<li>(.*?)</li>", html)
    secagg = [s for s in sentences if s.startswith("secagg:")]
    dp = [s for s in sentences if s.startswith(DP)]
    assert len(secagg) == 2 and all("holds against click guessing" in s for s in secagg)
    assert all("threat model server" in s and "nDCG@10" in s for s in secagg)
    assert dp and all("does not hold" in s and "claimed epsilon 4.50" in s for s in dp)
    assert any(s.startswith("none (no defense)") and "click guessing succeeds" in s for s in sentences)


def test_data_strings_are_escaped(tmp_path, monkeypatch):
    monkeypatch.setattr("reports.render.PLOTS", {})  # plots are pixels; checked above, slow
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


def test_report_without_results_still_renders(tmp_path):
    runs = pd.DataFrame([dict(run_key="k", campaign="c", status="failed", config="{}", env=None,
                              seed=1, seconds=float("nan"), finished_at="t", error="boom <b>")])
    path = write_report({"runs": runs}, tmp_path)
    html = path.read_text()
    assert "No attack results" in html and "boom &lt;b&gt;" in html


def test_cli_report_prints_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("reports.render.PLOTS", {})
    store = ResultsStore(tmp_path / "r.sqlite")
    for r in synthetic_runs()[:4]:
        store.record_run(r["run_key"], "synthetic", r["config"], {"numpy": "9.9"}, r["seed"], 1.0, r["tables"])
    assert main(["report", "--store", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(tmp_path / "out" / "report.html")
    html = (tmp_path / "out" / "report.html").read_text()
    assert "numpy (runs)" in html and "9.9" in html
