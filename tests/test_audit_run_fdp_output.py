"""The f-DP figures leave audit-run everywhere: the printed table, --json, the stored run_audits row
and the report's whole-run section, the same numbers in each."""

from types import SimpleNamespace

import pytest

from fltr_audit.cli import main
from fltr_audit.store.results import load
from reports.sections import whole_run_section
from tests.cli_json import cli_result

ARGS = ["audit-run", "fpdgd", "--defense", "dp-fedavg(noise_multiplier=2,clip=1)", "--canaries", "100", "--rounds", "5",
        "--clients", "10", "--population", "100", "--queries-per-client", "2", "--data", "synthetic:mq2008?queries=200"]


def test_f_dp_figures_in_the_table_json_store_and_report(tmp_path, capsys):
    assert main(ARGS) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "μ-GDP" in table and "Mahloujifar" in table and "claim as μ-GDP over 1 participation" in table
    store = tmp_path / "r.sqlite"
    assert main([*ARGS, "--json", "--store", str(store)]) == 0
    printed = cli_result(capsys.readouterr().out)
    row = load(store)["run_audits"].iloc[0]
    for key in ("mu_lb", "mu_limit", "mu_claimed", "epsilon_lb_fdp", "fdp_guesses", "fdp_correct", "fdp_pool",
                "fdp_participations", "verdict_by"):
        assert row[key] == printed[key], key
    # 1 / z, one participation: the mu the claim's (eps, delta) asserts, inverted to 1e-12
    assert printed["mu_claimed"] == pytest.approx(0.5, abs=1e-12) and printed["verdict_by"] == "f-DP mu"
    section = whole_run_section(SimpleNamespace(tables={"run_audits": load(store)["run_audits"]}))
    text = str(section)
    assert "claim as μ-GDP" in text and "f-DP one-run lower bound μ (95 %)" in text and "Mahloujifar" in text


def test_the_table_says_why_there_is_no_estimate_what_would_test_the_claim_and_the_float_finding(capsys):
    """A message-scope local Laplace run with few canaries: no Andrew et al. estimate (and why), an
    untestable claim with the canaries that would test it, and the floating-point finding -- the
    same figures as --json."""
    args = ["audit-run", "fpdgd", "--defense", "dp-local-laplace(eps=4.5)", "--canaries", "40", "--rounds", "3",
            "--clients", "40", "--data", "synthetic:mq2008?queries=200"]
    assert main([*args, "--json"]) == 0
    printed = cli_result(capsys.readouterr().out)
    assert printed["claim_verdict"] == "untestable" and printed["epsilon_estimate"] is None
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "n/a (message-scope" in text
    assert f"about {printed['canaries_needed']:,.0f} canaries" in text
    assert f"floating-point side channel below the scores' rounding: {printed['float_channel'].upper()}" in text
