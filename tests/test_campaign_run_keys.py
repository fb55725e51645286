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

# Regression pin, not tuned numbers: the run keys of every campaigns/*.toml in grid order. Re-pinned
# for issue 43: a campaign plans its probe lists by default (probe.min_effect, probe.power), and the
# planned count enters every run's key (the runs compute more lists, so they are new runs). First
# computed before the rename on the unchanged main checkout (commit 0729ddd) with
#   cd /work/main && PYTHONPATH=. /work/venv/bin/python -c "from pathlib import Path; \
#   from fltr_audit.runs.campaign import expand, load_spec; \
#   print({p.name: [r.key for r in expand(load_spec(p), max_runs=None)] for p in sorted(Path('campaigns').glob('*.toml'))})"
PINNED_KEYS = {
    "defense_comparison.toml": [
        "951741d88dd3590d", "fe63530df066f8ca", "7439a0b00e6629c9", "cfce2438c260cdd1", "91e1e1563fc0194d", "8fcc9313a0c83090",
        "d88dc4be3b0d998a", "43f16a9e194ad196", "ad967dc28e2648d9", "08982c6c8efa1756", "e9e76d3fe335b4a5", "e55b3207414e9c33",
        "6c0db9dd3a484837", "21eb5ba4ea11d395", "cf4cd46376a9fc5f", "a1975d46ad3158f4", "aa7496d8ed950d03", "0d8a87277ab0b999",
        "12ea38a70c6e7be2", "1491ee6ac68bc3f4", "26c477b5e8934408",
    ],
    "fedips_gamma.toml": [
        "dd92dee9944b6899", "11b0e2457e5853bf", "1a0b700914af0b21", "409dc6e536524714", "b693385ff111b4e0", "3abd49a15abcc472",
        "9355f194f1dc4d48", "6ade3ef62cbddf7f", "3242fdc6296c4698", "13547139a9c9a2d5", "b06d9a032ca26e31", "c146327ff2b5a90c",
        "acb3a14be3d18608", "b4d8e3489c59bce4", "848d37cb9f580b70", "c6876d463e71af68", "ba463221cf336cbb", "422b56df920b3f46",
        "361e331bc5ffbe78", "a36053672efab88a", "e11f114fae35cdbc", "149327353e72ff6a", "199de13937b0c39a", "44e1a88674129828",
        "d8638b0e5cf60546", "bfa8dea0cb6d71c4", "1a7c70bc7bc9a7b2", "6b6f3b2ce7c7eb3b", "63ea8b5add8c8185", "056c439d03ac960c",
        "352652dc05c0bd31", "873ec315406a5d6e",
    ],
    "foltr_es_rr.toml": [
        "cf89ebdc3868e82c", "cab2b124d4cbe672", "e91a474c6b67523d", "e1114ebc40162f89", "8c68ba3d0cd5cf2e", "7c0f10b191736a5b",
        "e24b59c07608e90d", "316b606c05b3a8f1", "0b42b72f4447c6a8", "18586866b98ba77d", "604798b733f39179", "79856b6ae59f4e06",
    ],
    "leakage_mq2008.toml": [
        "de8d7019502e246a", "cf9db4c0d4ebf5d2", "69d69e1b5b95dc99", "a60661b7c33e4bb9", "00d4ac6b96c91283", "e7ff17e4558280a7",
        "01e729e27704d24b", "86025a6a07350bd2", "c11715207db3e242", "bc7fb33223051efa", "34af8ecac3199604", "e8db05a055de2ab0",
        "7366f80bba76bcfa", "e758a4683ac67c5c", "4726eb6395a7e51f", "a568660b5d29a992", "04a7df6936965533", "ab7cbc61152dcf1d",
        "b9f84b07e9d13d82", "7728e45bed9c0864", "8721dbee69ee18cd", "ffaa88852446ab40", "cee6273061d12d9d", "2431faff03b6cc0b",
        "dbe76cf45f0ce1e5",
    ],
    "non_iid_mq2008.toml": [
        "7ba8f39aa55fdfae", "91f2480f9bbb50b4", "6ad3ccc400d1bbfa", "456ca2e0b3ef7c09", "736d4bf4c02cb1b0", "9be8d7f29cbabb66",
        "d11667417b2098d6", "a364e3d36264653e", "b433b2192f961086", "edf14e88f8f8153f", "6b82a1d217a988de", "bf95e7c5baa8d2f6",
        "ff13dc142baa8e56", "d0e9df456208d214", "8d3503c67c285722",
    ],
    "pham_mq2008.toml": [
        "8e07fd58ba0a9c28", "a54329c274a03db9", "7265a62b4e59fee7", "a1c23deddc60c3e5", "d10d18f336fdced9", "20ea0cd7bd5aad8d",
        "de8c3a0e8710f835", "64c4fb841a98627e", "3bc5c5e0ccb75794", "9db3f95a80f77c0e", "802560bd01c3e465", "3a0e4555218524de",
        "c528e91f329d45e1", "57f07da6b8d60d53", "11190bf918223bc8",
    ],
    "production_vs_papers.toml": [
        "78772d8825b007a5", "d2b370bfcd359990", "7979f31eb1c13b50", "55b98949f62c7576", "bd96a9d42286d289", "7897abd07871c67e",
        "ec6fc8d3e29c9ba0", "8dc6473c9805fc2a", "76811786538369bb", "f577b375db453d35", "78e39ef1a428351f", "854742e276f94e27",
        "49e9b05ff3b6cb85", "0ad51dbd0feed9ea", "ff0d014cd250deb0", "4e9782b8e6f880fa", "d80a9ae66ba4b825", "8977346d9b4048b0",
        "ed830145dd313c63", "6abc669008ce81c9", "99b7fe997ac8e9c5", "7573654768cf86fd", "c5da8d76357bec24", "83cf3b86b3d89e03",
        "48121da8e83dbef7", "da563bfc4b7cd218", "51d3faf8b8fcdf1f", "f1d1f20045d22c72", "f769aed5f92dd2f1", "2a626bb53acd314c",
        "71e7fd4bf4037649", "c30047d3a2e31c59", "2c3b74799a0142ab", "f148934a4cb9976c", "97ddb2fd51532a6f", "9a99bf99da8cc3e7",
        "4085d202a04dd56a", "006d3893fcbcb48c", "c215d475cbccfebe", "1ff6ec59d09ed768", "8fdbaa568c52fa70", "ce6afce49551d529",
        "a33877432149832f", "1980af05d967a41d", "7f72f577317b17b2", "4fd4bf8794499ee2", "f3a79d66dc9a7199", "08240fdceafb723a",
    ],
    "production_vs_papers_foltr_es.toml": [
        "6f3d1583fca1c140", "11f564ac085e3b99", "5a155586ed85bb22", "82f21c1028090afd", "d7f1a5a59ae15c1e", "3c60f7808de0b99b",
        "15fd1f2c6b85aa03", "d1f300a569acdcb9", "35a41dbab665a847", "39cc5f8b8e1703e5", "14048b1ba714ba6a", "d9d91efc5c266613",
    ],
    "secagg_cohort_sweep.toml": [
        "768b9d930e2f61ab", "c938fad58c4a6d39", "1031dec26ea651ee", "9cf6f1f2ca3e2ab5", "4951c52aa3ed29c9", "8cd1d977614275da",
        "ff463e25e4eea3af", "1c1159a21caf0ad7",
    ],
    "unlearning_mq2008.toml": [  # new with [unlearning] (issue 41): linear, then mlp; five methods each
        "5b4007e4f3a373a5", "80beac8a3128a3eb", "b802ebd767a8ac6d", "828bb8b47327e0c8", "a4a719f1717466a8",
        "0f325ae052c38d0e", "487de2918d716004", "7a2d1dd7fc5cd6bb", "9da7595fa0f55285", "130d9fce54e67978",
    ],
    "whole_run_canaries.toml": [
        "51332d30dbf747e7", "d86dc60276be76a9", "e2b4fcc6d2267b26",
    ],
}


PINNED_DIGESTS = {  # large grids: the SHA-256 of their run keys in grid order, joined by commas
    "robustness_mq2008.toml": (1430, "2029768a78dde89fda6efe1591115f05cd3d5049d9f4e29099a40cefcd476bcc"),  # i43: lists planned
}


def test_the_pin_covers_every_shipped_campaign():
    assert sorted([*PINNED_KEYS, *PINNED_DIGESTS]) == sorted(p.name for p in CAMPAIGNS.glob("*.toml"))


@pytest.mark.parametrize("name", sorted(PINNED_DIGESTS))
def test_large_shipped_campaigns_keep_their_run_keys(name):
    import hashlib

    if '"../shared/data/' in (CAMPAIGNS / name).read_text() and not Path("../shared/data/letor/MQ2008").is_dir():
        pytest.skip("the campaign names ../shared/data/letor/MQ2008, absent beside this checkout")
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
