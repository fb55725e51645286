"""Engine errors name the parameter; each front end renames it once to what its user typed:
the CLI to its option (``cli.common.OPTIONS``), the campaign reader to its key
(``campaign_spec.CAMPAIGN_KEYS``), the Python API to its keyword (``api.api_names``)."""

import pytest

import fltr_audit
from fltr_audit.cli import main, register_commands
from fltr_audit.constraints import ParameterError

# (audit option, its value; campaign table, key, value; API keyword, value; the engine's problem)
CASES = [
    # a run-spec setting, checked at the door
    (["--trials", "0"], ("audit", "trials", "0"), {"trials": 0}, "--trials", "audit.trials", "trials",
     "must be an integer >= 4 or one of auto, got 0"),
    # an engine keyword, checked by the engine's own parser (fltr_audit.engine.population)
    (["--non-iid", "bogus"], ("algorithm", "non_iid", '"bogus"'), {"non_iid": "bogus"}, "--non-iid",
     "algorithm.non_iid", "non_iid", "unknown setting 'bogus'"),
    # a name the engine builds (attacks.registry), spelled differently by all three
    (["--attack", "telepathy"], ("audit", "attacks", '["telepathy"]'), {"attacks": ["telepathy"]}, "--attack",
     "audit.attacks", "attacks", "unknown attack 'telepathy'"),
]


@pytest.mark.parametrize("cli,campaign,keywords,option,key,keyword,problem", CASES,
                         ids=[c[4] for c in CASES])
def test_the_same_bad_value_is_named_as_each_user_typed_it(tmp_path, capsys, cli, campaign, keywords, option,
                                                           key, keyword, problem):
    assert main(["audit", "--data", "synthetic:mq2008?queries=40", "--store", str(tmp_path / "a.db")] + cli) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fltr-audit: error: {option}: {problem}"), err

    table, name, value = campaign
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\n[{table}]\n{name} = {value}\n')
    assert main(["campaign", "run", str(path), "--store", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fltr-audit: error: {path}: key '{key}': {problem}"), err
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "a.db").exists()

    with pytest.raises(ParameterError) as info:
        fltr_audit.audit(**keywords)
    assert info.value.parameter == keyword and str(info.value).startswith(f"{keyword}: {problem}")


def test_an_engine_error_names_the_python_keyword_and_a_door_renames_it_once():
    from fltr_audit.cli.common import as_option_error
    from fltr_audit.engine.data.load import load_splits

    with pytest.raises(ParameterError) as info:
        load_splits("synthetic:mq2008", fold=6)
    assert str(info.value) == "fold: must be an integer in [1, 5], got 6" and not info.value.door
    once = as_option_error(info.value)
    assert str(once) == "--fold: must be an integer in [1, 5], got 6" and once.door
    assert as_option_error(once) is once                     # a renamed error is never renamed again
    scoped = ParameterError("k", "must be an integer >= 1, got 0").within("attack distance: ")
    assert str(as_option_error(scoped)) == "attack distance: k: must be an integer >= 1, got 0"  # not --k


def test_every_option_in_the_map_is_an_option_of_some_command():
    import typer

    from fltr_audit.cli.app import app
    from fltr_audit.cli.common import OPTIONS

    register_commands()
    declared: set[str] = set()

    def walk(command) -> None:
        for param in command.params:
            declared.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    options = {o for o in OPTIONS.values() if o.startswith("--")}  # ALGORITHM: the positional argument
    assert sorted(options - declared) == []


def test_the_algorithm_argument_names_the_built_in_algorithms_and_where_to_find_plug_ins():
    from fltr_audit.cli.options import ALGORITHMS_HELP
    from fltr_audit.engine.algorithms.registry import algorithm_names

    assert all(name in ALGORITHMS_HELP for name in algorithm_names(auditable=True))
    assert "fltr-audit algorithms list" in ALGORITHMS_HELP


def test_the_flower_engine_setup_names_its_algo_parameter():
    """The Flower apps' setup is engine code: it names the keyword ``algo``, not the CLI's flag."""
    pytest.importorskip("flwr", reason="the flower extra is not installed")
    from fltr_audit.constraints import ParameterError
    from fltr_audit.flower.engine_app import EngineSetup
    with pytest.raises(ParameterError, match=r"^algo: 'sgd' does not run on Flower") as caught:
        EngineSetup(data="synthetic:mq2008", algo="sgd")
    assert caught.value.parameter == "algo"
