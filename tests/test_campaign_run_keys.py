"""Run keys of the shipped campaigns are a compatibility contract: a campaign resumes into an
existing store only if every run keeps its key. Renaming clip's ``delta`` to ``sensitivity``
changed the canonical defense names in the run configs; ``run_key`` hashes their legacy
spelling, so the keys stay as they were (fltr_audit/spec/grid.py, ``run_key``)."""

import re
from pathlib import Path

import pytest

from fltr_audit.spec.campaign import load_spec

from fltr_audit.spec.grid import expand

CAMPAIGNS = Path(__file__).resolve().parents[1] / "campaigns"

# Regression pin, not tuned numbers: the run keys of every campaigns/*.toml in grid order,
# computed before the rename on the unchanged main checkout (commit 0729ddd) with
#   cd /work/main && PYTHONPATH=. /work/venv/bin/python -c "from pathlib import Path; \
#   from fltr_audit.runs.campaign import expand, load_spec; \
#   print({p.name: [r.key for r in expand(load_spec(p), max_runs=None)] for p in sorted(Path('campaigns').glob('*.toml'))})"
PINNED_KEYS = {
    "defense_comparison.toml": [
        "f9c0392fef1919e9", "c1831e0f44b43b4b", "ab86be7df96bc9af", "e238341e9f0df7db", "e71437c80c8483fd", "475e2197cb6c54a7",
        "46a55005fadeb493", "8ee8689faa9ef226", "aaf0f98baf337b04", "01c589e8553a3414", "ee5079c0da9c5e50", "b1dc594f70d50bbe",
        "855d38371ed54ea3", "1750598b28bfea32", "bdd5e2fd85a25c22", "7e6f43e0be2b36e2", "e4298d1c142e3a15", "5303c3ba9b22e043",
        "b99b3c00e6cea894", "1ee39f11885b444b", "4549f2671dddb202",
    ],
    "fedips_gamma.toml": [
        "fa6fb7d36ac87db4", "e12a0d03c9d62c40", "408dde40f608e4d1", "e2bac96d6f565419", "1a7b6258be0ff3a8", "213aecbdb0173369",
        "e02d052df978a0d0", "f4fd7270b9e3f78f", "cdb88145b067cc89", "3547a17544099ec9", "b62bd3f6951fa1b0", "d8042b147635640a",
        "b214418a97e1c630", "95cc99de78450829", "5c520fcbae1bc09e", "f096ea4be9ee14ce", "b9141c87baf129fa", "e6168ad3b28f1ed3",
        "05a64412561db365", "bd81ca5a6272f9ec", "7c7ada4aca517fc6", "8031a6b8012e7662", "a6e7dfa9b095cc37", "09e4cd99c706a974",
        "fbd263f8ad510f8f", "fbff79cd803068fa", "4f5e8e9e4cb1692b", "200ed30df692bcd7", "38781fca247d8b7d", "0abd4292430c9dfd",
        "53d6a49738202569", "dc7b7bf5eb38dbf4",
    ],
    "foltr_es_rr.toml": [
        "1ab7bda3ce2ed6cb", "200be1b1e036d109", "8590ce7beaedc487", "ec393da1a41dd683", "f91eb7848389705b", "9495111a3b28ca4f",
        "d362fd11b1f73ffc", "f369de51636b2f6c", "631caecc7414c2f0", "dea73cca46dba3c7", "a1544da6e84843af", "4d4088bd7e915acb",
    ],
    "leakage_mq2008.toml": [
        "0c32ffec1e2d3b9d", "9b1e0a5b12740533", "ad70fe2e27b6798b", "e94971162020af7d", "b8204c08f3c34e05", "d3cbfa09c0b6505a",
        "de4a93ef89fa8419", "3da2ee361bd1f946", "5ab243ca372ff00c", "d9122cc09995e34d", "6f5db1234c2201b4", "5f15a28c3773e3bc",
        "589f8499877aa4a4", "03996260d65afbea", "6cebcb3b91e88d84", "5bc15df106279ab8", "a05f9aa0416d3144", "dd57ef154cc90f24",
        "6a5789308250d89d", "f5342ecc8ae217ed", "e10ea28c7381c901", "91fa7ed54c2b8bfd", "066e9f7e0bb8a191", "cfeba2d74a3536c4",
        "11a10488097e32e9",
    ],
    "non_iid_mq2008.toml": [
        "776785e548df0d32", "3116ef37a066d053", "dd86c8e43609ebe1", "3ad85efb46282091", "d07eac458f7ec0d3", "536baa80330206c4",
        "1b429a9eac74deab", "7e529583e2510d05", "ee0f86e215a50ab9", "8b15747dfe662203", "5ab0424d83eacce4", "585dacd994c79d0b",
        "e95edba56121a37d", "f5c3314b41f58e00", "f03a58298ec49613",
    ],
    "pham_mq2008.toml": [
        "cdf34b75add206af", "fdf95e2101ad43c0", "6de6902b5648fe8a", "4481ca6462895717", "e98348d18c7c0ba8", "70f11c7bfb5ce883",
        "b677240abac57534", "0da653022b011691", "de87e334d663c3ba", "329c5e6c716a816e", "4d8928d4aaff8ecb", "20f0e5cf64d6cebd",
        "98b94461017202de", "5ae0f9bd2933bbf9", "caaed8c40faaf06d",
    ],
    "production_vs_papers.toml": [
        "01942c36c5cf826f", "58c2639d69bd7587", "4fa450de9cf8f9d6", "3f3ba3bd72d62f87", "e878183be05939fd", "09f33acd947ab028",
        "8ef6185856973d86", "a5cdf536693ebaaa", "0c93b584d2f3f585", "3d4bd4c1cc1d5a07", "6933142d3fba528a", "c6ffa6ebf997655d",
        "827650f3877fd270", "250537148c95438b", "380109ca8a52450f", "bf45320015c2d54c", "0daf81a8b95c0f11", "4b690c7d87d25c77",
        "5885fe0ef3c7613f", "abcc7f99aabdae09", "52ec2bdb7362501f", "697fe09ee5922159", "c2a688f6ccc84786", "2cbcb9206fde374c",
        "ee60ec81f08d2686", "383558b824c6c95d", "205d3fef4c24459f", "c981d1a64de9cbba", "b6e0b15bcb0186dc", "5d002806271b245d",
        "307a1b8e8e5807e9", "3a2fe78602ce5537", "d70fefc18844a9cb", "b5d8df43bdf42a91", "a128eb49a370e0ad", "491a3c05b8b64a42",
        "a6d24147cf4db844", "e79ee808b67e1cee", "d34c77fb893b44f5", "df67e771172ae377", "abf7b996abd627b8", "7864d53edda28c21",
        "b937d324bdb6857e", "f998b9afdaa1cff1", "273d07e015986895", "f4d1e0f92eb75d95", "d26e8b9aa59ebb1d", "0b0044945a358b3a",
    ],
    "production_vs_papers_foltr_es.toml": [
        "35b46f1e09aa182c", "c76d56ba01568888", "2ec8337a22df91cb", "4046475f22d16d7e", "3c29b45a0112914f", "e1f688eab380d766",
        "91cdb577a914e548", "bcd077e1edda4e2f", "342e91036586e9c1", "b032d7e27c1841d5", "02b3b37b14a633b8", "9b76c5857e4ca4e0",
    ],
    "secagg_cohort_sweep.toml": [
        "adb192724e78525b", "644cab987e54b9c9", "7af221fff2965154", "37697552cb03df0f", "ecf046b2dd129b3c", "b0213cf174c2ee60",
        "062898b0306d9e19", "700eea5e9c3f7731",
    ],
    "whole_run_canaries.toml": ["9d2add34eabd596c", "58ac43c3c208c0bd", "57a6f55d83cc60f9"],  # new with [audit_run]
    "unlearning_mq2008.toml": [  # new with [unlearning] (issue 41): linear, then mlp; five methods each
        "dcd4006761d38dab", "2d57c2c2ceec5ff7", "9055e450db3e7d8b", "ca1f49a5247df524", "0b52195973e57430",
        "1ba86d558048486f", "d9f1140de1fa38e9", "c768e3e31eb3dfad", "7ad9ac0d3a300820", "91a2ab8c4578020e",
    ],
}


PINNED_DIGESTS = {  # large grids: the SHA-256 of their run keys in grid order, joined by commas
    "robustness_mq2008.toml": (1430, "5fe520850751f5231e0c1f5e4f6d99a6eedd147d25f42314c71091f1304ec686"),  # new with algorithm.poison
}


def test_the_pin_covers_every_shipped_campaign():
    assert sorted([*PINNED_KEYS, *PINNED_DIGESTS]) == sorted(p.name for p in CAMPAIGNS.glob("*.toml"))


@pytest.mark.parametrize("name", sorted(PINNED_DIGESTS))
def test_large_shipped_campaigns_keep_their_run_keys(name):
    import hashlib

    keys = [r.key for r in expand(load_spec(CAMPAIGNS / name), max_runs=None)]
    assert (len(keys), hashlib.sha256(",".join(keys).encode()).hexdigest()) == PINNED_DIGESTS[name]


@pytest.mark.parametrize("name", sorted(PINNED_KEYS))
def test_shipped_campaigns_keep_their_run_keys(name):
    if '"../shared/data/' in (CAMPAIGNS / name).read_text() and not Path("../shared/data/letor/MQ2008").is_dir():
        pytest.skip("the campaign names ../shared/data/letor/MQ2008, absent beside this checkout")
    assert [r.key for r in expand(load_spec(CAMPAIGNS / name), max_runs=None)] == PINNED_KEYS[name]


def test_a_campaign_written_with_the_deprecated_alias_keeps_the_same_keys(tmp_path):
    text = (CAMPAIGNS / "defense_comparison.toml").read_text()
    assert "clip(sensitivity=" in text
    legacy = tmp_path / "defense_comparison.toml"
    legacy.write_text(text.replace("clip(sensitivity=", "clip(delta="))
    with pytest.warns(FutureWarning, match="'delta' is deprecated"):
        runs = expand(load_spec(legacy), max_runs=None)
    assert [r.key for r in runs] == PINNED_KEYS["defense_comparison.toml"]
    assert not any(re.search(r"[(,]delta=", r.config["defense"]) for r in runs)  # configs: the current spelling
