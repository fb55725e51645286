"""Defense stacks: parsing, canonical names, inherited sensitivities, the deprecated ``delta``
alias of ``sensitivity``, claims, the CLI."""

import warnings

import numpy as np
import pytest

from defenses.clipping import Clip
from defenses.dp_distributed import DistributedLaplace
from defenses.dp_gaussian import Gaussian
from defenses.dp_local import LocalLaplace
from defenses.randomized_response import RandomizedResponse
from defenses.secagg import IdealSecAgg
from defenses.secagg_protocol import SecAggProtocol
from defenses.listing import list_defenses
from defenses.stack import parse_defense
from fltr_audit.engine.aggregation import FedAvg
from fltr_audit.cli import main
from fltr_audit.errors import FltrDeprecation, FltrError
from tests.cli_json import cli_result


def test_none_is_the_empty_stack_with_fedavg():
    for text in ("none", "  none "):
        s = parse_defense(text)
        assert s.client == () and isinstance(s.aggregator, FedAvg) and s.name == "none"
        assert s.claim.scope == "none"
    for text in ("", "   "):  # an empty --defense is a mistake, not a way to say none (issue 23)
        with pytest.raises(FltrError, match="write 'none'"):
            parse_defense(text)


def test_published_fpdgd_stack():
    s = parse_defense("clip(sensitivity=5)+dp-distributed(eps=4.5)+secagg")
    assert [type(d) for d in s.client] == [Clip, DistributedLaplace]
    assert isinstance(s.aggregator, IdealSecAgg)
    assert s.name == "clip(sensitivity=5)+dp-distributed(eps=4.5)+secagg"
    assert (s.claim.epsilon, s.claim.scope) == (4.5, "aggregate")


@pytest.mark.parametrize("text, canonical", [
    ("clip+dp-distributed", "clip(sensitivity=5)+dp-distributed(eps=4.5)"),
    ("clip(sensitivity=5.0, of=weights) + dp-distributed(eps=4.50, sensitivity=5)",
     "clip(sensitivity=5)+dp-distributed(eps=4.5)"),
    ("clip(sensitivity=3)+dp-distributed(eps=2.3,sensitivity=3)", "clip(sensitivity=3)+dp-distributed(eps=2.3)"),
    ("clip(sensitivity=3)+dp-distributed(eps=2.3,sensitivity=5)",
     "clip(sensitivity=3)+dp-distributed(eps=2.3,sensitivity=5)"),
    ("dp-local-laplace(norm=l2)", "dp-local-laplace(eps=4.5,norm=l2)"),
    ("rr(p=0.9,values=[1,0,0.5])", "rr(p=0.9,values=[0,0.5,1])"),
    ("secagg-protocol(k=20,drop=0.1)", "secagg-protocol(drop=0.1,k=20)"),
    ("secagg(drop=0)", "secagg"),
])
def test_canonical_names_are_stable(text, canonical):
    assert parse_defense(text).name == canonical
    assert parse_defense(canonical).name == canonical


def test_noise_defenses_inherit_the_sensitivity_of_a_preceding_clip():
    s = parse_defense("clip(sensitivity=3)+dp-distributed(eps=1.2)")
    assert s.client[1].sensitivity == 3 and s.client[1].scale == pytest.approx(2.5)
    assert parse_defense("dp-distributed(eps=1.2)").client[0].sensitivity == 5  # the default without a clip
    assert parse_defense("clip(sensitivity=4)+dp-gaussian(sigma=2)").client[1].clip == 2.0
    assert parse_defense("clip(sensitivity=4)+dp-local-laplace(eps=1)").client[1].sensitivity == 4


def test_built_objects_carry_their_parameters():
    s = parse_defense("clip(sensitivity=2,of=update)+dp-gaussian(sigma=3,clip=0.5,dp_delta=1e-6)"
                      "+secagg-protocol(k=4,bits=32)")
    clip, gauss = s.client
    assert (clip.sensitivity, clip.of) == (2, "update")
    assert isinstance(gauss, Gaussian) and (gauss.sigma, gauss.clip, gauss.dp_delta) == (3, 0.5, 1e-6)
    assert isinstance(s.aggregator, SecAggProtocol) and (s.aggregator.k, s.aggregator.bits) == (4, 32)
    assert s.claim == gauss.claim  # the message-scope claim wins over the aggregate's no-DP claim
    assert isinstance(parse_defense("rr(p=0.5)").client[0], RandomizedResponse)
    assert isinstance(parse_defense("dp-local-laplace").client[0], LocalLaplace)


def test_stack_claim_takes_the_strongest_message_claim():
    s = parse_defense("dp-local-laplace(eps=3)+dp-local-laplace(eps=1)+dp-distributed(eps=0.5)")
    assert (s.claim.epsilon, s.claim.scope) == (1.0, "message")


@pytest.mark.parametrize("text, pattern", [
    ("foo", r"defense 'foo': unknown defense 'foo'"),
    ("clip(x=1)", r"defense 'clip\(x=1\)': clip has no parameter 'x'"),
    ("clip(sensitivity=-1)", r"sensitivity=-1 must be a number in \(0, 1e\+100\]"),
    ("clip(delta=-1)", r"delta=-1 must be a number in \(0, 1e\+100\]"),  # the deprecated alias, named as written
    ("clip(sensitivity=abc)", r"'abc' is not a valid float"),
    ("clip(of=grad)", r"must be one of weights, update"),
    ("clip(sensitivity=1", r"malformed component"),
    ("clip(sensitivity=1,sensitivity=2)", r"given twice"),
    ("clip(delta=1,delta=2)", r"given twice"),
    ("clip(delta=1,sensitivity=1)", r"clip parameter 'sensitivity' given twice \(as 'sensitivity' and as its "
                                    r"deprecated alias 'delta'\)"),
    ("clip+dp-local-laplace(sensitivity=2,delta=2)", r"dp-local-laplace parameter 'sensitivity' given twice"),
    ("secagg+clip", r"secagg must come last"),
    ("secagg+secagg-protocol", r"only one aggregator"),
    ("none+clip", r"'none' cannot be combined"),
    ("secagg-protocol(k=3)", r"k=3 must be 0 \(complete graph\) or an even number"),
    ("secagg(drop=1)", r"drop=1 must be a number in \[0, 1\)"),
    ("dp-gaussian(dp_delta=2)", r"dp_delta=2 must be a number in \(0, 1\)"),
    ("rr(values=0)", r"list of numbers"),
])
def test_bad_stacks_name_the_defense_string(text, pattern):
    with pytest.raises(FltrError, match=pattern) as info:
        parse_defense(text)
    assert f"defense {text!r}" in str(info.value) and "\n" not in str(info.value)


def test_list_defenses_covers_every_defense():
    rows = {r["name"]: r for r in list_defenses()}  # plug-ins other tests registered in this process may follow
    assert set(rows) >= {"clip", "dp-distributed", "dp-local-laplace", "dp-gaussian", "rr", "secagg",
                         "secagg-protocol", "dp-fedavg", "ddgauss", "shuffle"}
    assert rows["dp-fedavg"]["default_claim"]["scope"] == rows["ddgauss"]["default_claim"]["scope"] == "aggregate"
    assert rows["shuffle"]["default_claim"]["scope"] == "none"  # its claim rests on the randomizer before it
    assert rows["dp-distributed"]["default_claim"] == {"epsilon": 4.5, "delta": 0.0, "scope": "aggregate"}
    assert rows["rr"]["default_claim"]["epsilon"] == pytest.approx(np.log(0.9 * 10 / 0.1))
    assert [p["name"] for p in rows["clip"]["parameters"]] == ["sensitivity", "of"]
    assert rows["clip"]["parameters"][0]["deprecated_alias"] == "delta"
    assert rows["secagg-protocol"]["role"] == "aggregator"


def test_cli_defenses_list_json_and_table(capsys):
    assert main(["defenses", "list", "--json"]) == 0
    rows = cli_result(capsys.readouterr().out)
    assert {r["name"] for r in rows} >= {"clip", "secagg-protocol"}
    assert rows[0]["default_claim"]["epsilon"] == "inf"
    assert main(["defenses", "list"]) == 0
    assert "dp-distributed" in capsys.readouterr().out


def test_cli_bench_bad_input_is_one_line_exit_2(capsys):
    assert main(["bench", "defenses", "--degree", "3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fltr-audit: error: --degree") and err.count("\n") == 1
