"""One command line (fltr_audit/cli/spelling.py): both list forms in every command, and the
deprecated spellings still work with one warning line."""

import warnings

import pytest
import typer

from fltr_audit.cli import app, main, register_commands
from fltr_audit.cli.spelling import normalize
from fltr_audit.spec.listing import split_list as split_top_level
from fltr_audit.errors import FltrDeprecation
from tests.cli_json import cli_result


@pytest.fixture(scope="module")
def root():
    register_commands()
    return typer.main.get_command(app)


def test_defense_lists_split_only_at_top_level_commas():
    assert split_top_level("none, clip(sensitivity=5,of=update)+secagg,rr(values=[0,0.5,1])") == [
        "none", "clip(sensitivity=5,of=update)+secagg", "rr(values=[0,0.5,1])"]


def test_each_list_option_takes_both_forms(root):
    assert normalize(root, ["audit", "--attack", "olsr,score", "--quiet"]) == [
        "audit", "--attack", "olsr", "--attack", "score", "--quiet"]
    assert normalize(root, ["audit", "--attack", "olsr", "--attack", "score"]) == [
        "audit", "--attack", "olsr", "--attack", "score"]
    assert normalize(root, ["audit", "--defense", "none,clip(sensitivity=5,of=update)+secagg"]) == [
        "audit", "--defense", "none", "--defense", "clip(sensitivity=5,of=update)+secagg"]
    assert normalize(root, ["audit", "--fold=1,2", "--seed", "0,1"]) == [
        "audit", "--fold", "1", "--fold", "2", "--seed", "0", "--seed", "1"]
    assert normalize(root, ["train", "fpdgd", "--fold", "2"]) == ["train", "fpdgd", "--fold", "2"]  # one value


def test_several_values_where_a_command_takes_one_are_named(root):
    from fltr_audit.errors import FltrError

    with pytest.raises(FltrError, match=r"^--seed: this command takes one value, got 2 \(0,1\)$"):
        normalize(root, ["train", "fpdgd", "--seed", "0,1"])
    assert normalize(root, ["train", "fpdgd", "--defense", "clip(sensitivity=5,of=update)"]) == [
        "train", "fpdgd", "--defense", "clip(sensitivity=5,of=update)"]  # a stack's own commas do not split


def test_old_spellings_of_the_algorithm_and_the_rounds_still_work(root):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = normalize(root, ["audit", "--data", "x", "--algo", "fedips", "--train-rounds", "3"])
    assert args == ["audit", "fedips", "--data", "x", "--rounds", "3"]
    assert [str(w.message) for w in caught if w.category is FltrDeprecation] == [
        "--train-rounds is deprecated: write --rounds",
        "--algo is deprecated: write the algorithm as the first argument (ALGORITHM)"]


def test_deprecated_spellings_are_rewritten_with_a_warning(root):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = normalize(root, ["train", "baselines", "--click-models", "perfect", "--C=10"])
    assert args == ["train", "baselines", "--click-model", "perfect", "--svm-c=10"]
    assert [str(w.message) for w in caught if w.category is FltrDeprecation] == [
        "--click-models is deprecated: write --click-model", "--C is deprecated: write --svm-c"]


def test_repeated_and_comma_forms_give_the_same_output(capsys):
    assert main(["epsilon", "--click-model", "perfect", "--click-model", "navigational", "--p", "0.9", "--json"]) == 0
    repeated = cli_result(capsys.readouterr().out)
    assert main(["epsilon", "--click-model", "perfect,navigational", "--p", "0.9", "--json"]) == 0
    assert cli_result(capsys.readouterr().out) == repeated


def test_train_names_the_option_the_user_typed(capsys, tmp_path):
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=30", "--lr", "-1", "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.strip() == (
        "fltr-audit: error: train fpdgd: --lr: must be a number in (0, inf), got -1.0")
    assert main(["train", "fpdgd", "--data", "synthetic:mq2008?queries=30", "--param", "k=0",
                 "--out", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip() == "fltr-audit: error: train fpdgd: --param k: must be an integer >= 1, got 0"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
