"""``audit-run``'s click model defaults to the algorithm's training one (FedIPS's users click by the
position-based model), as ``audit-unlearning``'s does: the command runs with its defaults."""

from __future__ import annotations

from fltr_audit.api.whole_run import whole_run_spec
from fltr_audit.cli import main


def test_the_default_click_model_is_the_algorithms_own():
    assert whole_run_spec("fedips", {})[0].algorithm.train_click_model == "pbm"
    assert whole_run_spec("fpdgd", {})[0].algorithm.train_click_model == "perfect"
    assert whole_run_spec("fpdgd", {"click_model": "navigational"})[0].algorithm.train_click_model == "navigational"


def test_audit_run_of_fedips_runs_with_its_defaults(capsys):
    code = main(["audit-run", "fedips", "--data", "synthetic:yahoo", "--clients", "3", "--rounds", "2",
                 "--canaries", "3", "--quiet", "--json"])
    assert code == 0, capsys.readouterr().err
