"""Mutation testing (issue 22) with tools/mutate.py: every sampled mutant of a privacy-critical
module must be killed by its tests unless tools/mutation_equivalent.txt lists it as equivalent,
with the reason.

* 2 seeded mutants per module (tools/mutation_ci.toml: each module with its fast oracle tests
  only), two forked children at a time, each stopping at its first failure (34 mutants, 19 s of
  CPU time: about 11 s on 2 idle cores, 22 s and 12 s before any test has compiled the kernels;
  listed slow, so out of ``-m "not slow"``, in CI). The executor freezes what it preloaded out of
  the garbage collector before forking (pytest collects at its exit, and a full collection over the
  inherited heap cost each child 0.4 s), and the copies keep numba's kernel cache.
  A child's timeout is 20 s of its own CPU time: over 3x what the slowest target's files take
  unmutated (6.3 s of CPU with pytest's start-up, the claim tests; 1-5 s for the others), so a
  surviving mutant finishes within it. A timeout counts as detected, as before, so the limit only
  decides how long a mutant that never finishes holds a core. A target's cheapest oracle file comes
  first: ``level = 1 + (1 - c) / 2`` in claim_decision._power sends the engine-level claim test into
  a trials search that runs to 2^40, so it held a core for the whole timeout (a third of the sample's
  child CPU) until the analytic power tests (tests/test_audit_power.py), which kill it in 0.6 s, ran
  before it. (The other such mutant, ``hi *= 2`` -> ``hi /= 2`` in claim_decision.gdp_mu, now ends:
  the bracket search is bounded, as it must be for delta > 1.) Its verdict does not depend on what ran
  before it: the children fork from a fresh interpreter (tools/mutate.py), not from this pytest session --
  which had imported every collected test file by its basename, so the old harness's children met
  "import file mismatch", exited 2 and counted every mutant as killed in a full-suite run
  (``test_verdicts_do_not_depend_on_the_calling_process``). Each mutant is made from the module's
  pristine source (it was made from copy 0, which at ``-j 2`` could hold another running mutant
  of the same module, so a mutant after a dropped ``if`` landed on another node).
* ``pytest -m mutation``: 8 seeded mutants per module against every test file that covers it
  (tools/mutation.toml), after checking the unmutated files pass.
"""

import importlib.util
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _mutate():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import mutate
    finally:
        sys.path.pop(0)
    return mutate


def _jobs() -> str:
    return str(max(2, min(4, os.cpu_count() or 2)))


def test_two_sampled_mutants_per_privacy_critical_module_are_killed(capsys):
    code = _mutate().main(["--config", str(REPO / "tools" / "mutation_ci.toml"), "--root", str(REPO),
                           "--sample", "2", "--seed", "0", "-j", _jobs(), "--timeout", "20", "--skip-baseline"])
    out = capsys.readouterr().out
    assert code == 0, out


@pytest.mark.mutation
def test_eight_sampled_mutants_per_privacy_critical_module_are_killed(capsys):
    code = _mutate().main(["--config", str(REPO / "tools" / "mutation.toml"), "--root", str(REPO),
                           "--sample", "8", "--seed", "0", "-j", _jobs(), "--timeout", "300"])
    out = capsys.readouterr().out
    assert code == 0, out


def test_mutants_are_what_their_ids_say():
    """The enumerator and the rewriter agree: a comparison flip changes exactly that operator."""
    mutate = _mutate()
    mutants = mutate.enumerate_mutants("defenses/dp_local.py", REPO)
    original = (REPO / "defenses/dp_local.py").read_text()
    assert mutants and all(m.module == "defenses/dp_local.py" for m in mutants)
    div = next(m for m in mutants if m.kind == "Div->Mult")
    src = mutate.mutated_source(div, REPO)
    assert src != original and src.count(" * ") > 0
    assert len({m.id for m in mutants}) == len(mutants)
    # parameter defaults (a paper's epsilon) are not mutated
    assert not any(m.kind.startswith("const 4.5") for m in mutants)


def test_every_listed_equivalent_mutant_still_exists():
    """Each id of tools/mutation_equivalent.txt names a mutant the enumerator still makes. Ids hold
    the line and a node counter, so an edit above a listed mutant renames it; a stale entry would
    silently stop excluding the equivalent mutant (3 in attacks/epsilon_bounds.py had gone stale
    after 6207f65), and a sample drawing it would fail with a mutant no test can kill."""
    mutate = _mutate()
    listed = mutate.load_equivalent(REPO / "tools/mutation_equivalent.txt")
    made = {m.id for module in {i.split(":")[0] for i in listed} for m in mutate.enumerate_mutants(module, REPO)}
    assert sorted(set(listed) - made) == []


def test_verdicts_do_not_depend_on_the_calling_process(tmp_path):
    """A caller that already imported the target's test file (as a pytest session does when it
    collects every file) and runs a live thread pool: the planted mutant ``X = 2`` is killed by the
    test that reads X, the mutants of the untested ``Y`` survive. The old harness forked its children
    from the caller, where pytest met the caller's module of the same basename, refused to collect
    ("import file mismatch", exit 2) and every mutant counted as killed. Run one copy (-j 1), the
    two same-size mutants within about a second: a stale .pyc of the first would kill the second."""
    repo = tmp_path / "repo"
    (repo / "fakepkg_mut").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "fakepkg_mut" / "__init__.py").write_text("")
    (repo / "fakepkg_mut" / "mod.py").write_text("X = 1\nY = 2\n")
    test_file = repo / "tests" / "test_fakemod_reads_x.py"
    test_file.write_text("from fakepkg_mut import mod\n\n\ndef test_x():\n    assert mod.X == 1\n")
    mutate = _mutate()
    config = tmp_path / "mutation.toml"
    config.write_text(f'preload = {json.dumps(mutate.PYTEST_PRELOAD)}\n[[target]]\nmodule = "fakepkg_mut/mod.py"\n'
                      'tests = ["tests/test_fakemod_reads_x.py"]\n')
    (tmp_path / "ids").write_text("fakepkg_mut/mod.py:1:const 1->2#4\nfakepkg_mut/mod.py:2:const 2->3#6\n")
    spec = importlib.util.spec_from_file_location("test_fakemod_reads_x", test_file)  # what collection does
    sys.modules["test_fakemod_reads_x"] = importlib.util.module_from_spec(spec)
    pool = ThreadPoolExecutor(2)
    try:
        assert pool.submit(sum, [1, 2]).result() == 3
        code = mutate.main(["--config", str(config), "--root", str(repo), "--equivalent", str(tmp_path / "none"),
                            "--ids", str(tmp_path / "ids"), "-j", "1", "--skip-baseline", "--json", str(tmp_path / "out.json")])
    finally:
        pool.shutdown()
        del sys.modules["test_fakemod_reads_x"]
    results = {r["kind"]: r for r in json.loads((tmp_path / "out.json").read_text())["results"]}
    assert {k: r["outcome"] for k, r in results.items()} == {"const 1->2": "killed", "const 2->3": "survived"}
    assert results["const 1->2"]["killed_by"] == "FAILED tests/test_fakemod_reads_x.py::test_x"
    assert code == 1


def test_the_copies_keep_numbas_kernel_cache_and_no_bytecode(tmp_path):
    mutate = _mutate()
    cache = tmp_path / "tree" / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    for name in ("kernels.f-10.py311.nbi", "kernels.f-10.py311.0.nbc", "kernels.cpython-311.pyc"):
        (cache / name).write_bytes(b"x")
    (tmp_path / "tree" / "pkg" / "stale.pyc").write_bytes(b"x")
    copy = mutate._copy_repo(tmp_path / "tree", tmp_path / "copy")
    assert sorted(p.name for p in (copy / "pkg").rglob("*")) == [
        "__pycache__", "kernels.f-10.py311.0.nbc", "kernels.f-10.py311.nbi"]


def test_a_target_that_defines_numba_kernels_is_refused(tmp_path, capsys):
    """A kernel compiled from the unmutated code could come back from the copied cache (numba does
    not see a change in another file a kernel calls): such a target is refused, not run."""
    mutate = _mutate()
    (tmp_path / "kernels.py").write_text("import numba\n\n\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    (tmp_path / "m.toml").write_text('[[target]]\nmodule = "kernels.py"\ntests = ["test_kernels.py"]\n')
    assert mutate.main(["--config", str(tmp_path / "m.toml"), "--root", str(tmp_path)]) == 2
    assert "kernels.py use numba" in capsys.readouterr().err
