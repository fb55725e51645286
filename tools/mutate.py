"""A small AST mutation tester for the privacy-critical modules (issue 22). Each mutant changes one
node of one module (``tools/mutants.py`` says which changes and makes them).

The runner copies the repository once per job (``-j``) to a temporary folder and runs each mutant
in a child forked from an *executor*: a fresh interpreter (``python -I``, single-threaded, writing
no bytecode) that imports only the third-party modules (``preload``) before forking, so that no
module, thread or lock of the caller (e.g. a pytest session that already imported the test files)
reaches a child, and each mutant's verdict is the same whatever ran before. A child runs pytest on
the module's own test files only, stopping at the first failure (``-x``), slow tests skipped. A
mutant is *killed* when a test fails or a test file cannot import it (the first failing test is
recorded), *timeout* when its child outruns the timeout (reported as such, beside the kills), else
it *survives*. The timeout is on the child's CPU time (3x the unmutated files' CPU time + 10 s
when they are run first, else ``--timeout``), so a loaded machine does not fire it; a child that
waits also times out after 10x that in wall time. The children's CPU time is reported (divide by
the cores for an idle machine's wall time).

What to mutate and which tests run is data (``tools/mutation.toml``, the sample of the default
test run ``tools/mutation_ci.toml``): ``[[target]]`` tables with ``module``, ``tests`` (the
module -> test files map) and an optional ``keyword`` (pytest -k), and an optional top-level
``preload`` list; ``tools/mutation_equivalent.txt``
lists the mutants (by id) that are equivalent, each with the reason, and they are never run.

    python tools/mutate.py [--config tools/mutation.toml] [--module defenses/dp_local.py]
                           [--sample 8 --seed 0 | --ids FILE] [-j 2] [--timeout 60] [--root .]
                           [--list] [--json out.json] [-v]

Exit 0 when no mutant outside the equivalent list survived, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from mutants import Mutant, enumerate_mutants, mutated_source

HERE = Path(__file__).resolve().parent


def load_config(path: Path) -> dict:
    """``[[target]]`` tables and an optional ``preload`` list (third-party modules)."""
    return tomllib.loads(path.read_text())


def load_equivalent(path: Path) -> dict[str, str]:
    """``id  # reason`` per line (ids contain ``#``: the reason starts at the first whitespace + ``#``)."""
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, reason = (re.split(r"\s+#\s*", line, maxsplit=1) + [""])[:2]
                out[key.strip()] = reason.strip()
    return out


PYTEST_PRELOAD = ("pytest", "hypothesis", "_hypothesis_pytestplug", "xdist.plugin", "anyio.pytest_plugin")
"""pytest and the plugins it loads in every child (hypothesis alone takes about a second, anyio's
plugin 0.2 s)."""
DEFAULT_PRELOAD = (*PYTEST_PRELOAD, "numpy", "pandas", "scipy.optimize", "scipy.special", "scipy.stats",
                   "dp_accounting", "dp_accounting.pld", "dp_accounting.rdp")
"""Third-party modules the executor imports once before forking (a config's ``preload`` replaces them)."""

SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The executor's environment: BLAS imported without worker threads (it forks)."""


def _pytest_args(target: dict) -> list[str]:
    """The child's pytest command line: the target's own test files only, stop at the first failure,
    no slow or mutation tests, the project's addopts (durations report) off, plain asserts (a child
    needs pass or fail, not pytest's explanations, whose rewriting of every assert of the test files
    cost each child about 0.1 s)."""
    args = ["-x", "-q", "--assert=plain", "-p", "no:cacheprovider", "-o", "addopts=",
            "-m", "not slow and not mutation"]
    if target.get("keyword"):
        args += ["-k", target["keyword"]]
    return args + list(target["tests"])


def _threads_alive() -> int:
    """OS threads of this process (BLAS pools included), or 1 where /proc is absent."""
    task = Path("/proc/self/task")
    return len(os.listdir(task)) if task.is_dir() else 1


def _start(copy_root: Path, pytest_args: list[str], log: Path) -> int:
    """Fork a child that runs pytest on ``copy_root``, its output in ``log``. Only the executor
    calls this: a fresh interpreter that holds no project or test module and no second thread."""
    if _threads_alive() != 1:
        raise RuntimeError(f"mutate: refusing to fork a process with {_threads_alive()} threads")
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.chdir(copy_root)
            sys.path.insert(0, str(copy_root))
            os.environ["PYTHONPATH"] = str(copy_root)  # a test's own python subprocess imports the mutant too
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(out, 2)
            sys.stdout = sys.stderr = open(1, "w", closefd=False)
            import pytest
            code = int(pytest.main(pytest_args))
            sys.stdout.flush()
            os._exit(code)
        except BaseException:
            import traceback
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(99)
    return pid


WALL_FACTOR = 10
"""A child also times out after this many times its CPU limit in wall time (a child that waits)."""


def _cpu_seconds(pid: int, wall: float) -> float:
    """CPU seconds a running child has used (its /proc stat), else its wall time: a timeout on CPU
    time does not fire because other processes load the machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return wall


def _outcome(status: int) -> str:
    """pytest's exit code: 0 all passed, 1 a test failed, 2 a collection error (the mutant broke an
    import: the executor holds no test module, so it is never a stale one), 5 no test selected (a
    configuration error, never a kill)."""
    return {0: "survived", 1: "killed", 2: "killed", 5: "no tests"}.get(os.waitstatus_to_exitcode(status), "error")


def _killed_by(log: Path) -> str:
    """The first test pytest reports failing (its short summary: ``FAILED id`` or ``ERROR id``)."""
    for line in log.read_text(errors="replace").splitlines() if log.is_file() else []:
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0]
    return ""


NUMBA_CACHE = (".nbi", ".nbc")
"""numba's cache of compiled kernels (index and code), copied with the tree so that the first child of
each copy does not compile the kernels again (about 4 s of CPU for FPDGD's): a cached kernel is
valid in a copy whose source files keep their modification time and size (what numba checks, and
what the copy keeps), and no target uses numba (``run`` refuses one), so no cached kernel
holds a mutated module's code."""


def _ignored(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: version control, virtual environments, bytecode and tool caches, and
    of each ``__pycache__`` everything but numba's kernel cache."""
    left_out = set(shutil.ignore_patterns(".git", ".venv", "*.pyc", ".pytest_cache", "*.egg-info", "site",
                                          ".mypy_cache", ".ruff_cache")(folder, names))
    if Path(folder).name == "__pycache__":
        left_out |= {name for name in names if not name.endswith(NUMBA_CACHE)}
    return left_out


def _copy_repo(root: Path, dest: Path) -> Path:
    shutil.copytree(root, dest, ignore=_ignored)
    return dest


def _write_module(copy: Path, module: str, source: str) -> None:
    """Write one module's source and drop its folder's bytecode cache: CPython validates a .pyc by
    the source's mtime in whole seconds and its size, so a same-size mutant written within the
    same second could otherwise load the previous one's bytecode."""
    shutil.rmtree(copy / Path(module).parent / "__pycache__", ignore_errors=True)
    (copy / module).write_text(source)


def _run_jobs(jobs: list[tuple[dict, Mutant | None, float]], copies: list[Path], sources: dict[str, str],
              logs: Path, verbose: bool) -> list[dict]:
    """Every (target, mutant, timeout) job (mutant None: the unmutated tests), at most
    ``len(copies)`` forked children at a time, each on its own copy of the repository (the mutant,
    made from the module's pristine ``sources``, written there and restored when its child ends)."""
    results, running, free, queue = [], {}, list(copies), list(jobs)
    originals = {t["module"]: sources[t["module"]] for t, _, _ in jobs}
    for n, job in enumerate(queue):
        queue[n] = (*job, logs / f"job{n}.log")
    while queue or running:
        while queue and free:
            target, mutant, timeout, log = queue.pop(0)
            copy = free.pop()
            if mutant is not None:
                _write_module(copy, mutant.module, mutated_source(mutant, copy, originals[mutant.module]))
            running[_start(copy, _pytest_args(target), log)] = (copy, target, mutant, timeout, log, time.monotonic())
        for pid, (copy, target, mutant, timeout, log, started) in list(running.items()):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if not done and _cpu_seconds(pid, time.monotonic() - started) <= timeout \
                    and time.monotonic() - started <= WALL_FACTOR * timeout:
                continue
            if done:
                outcome = _outcome(status)
            else:
                os.kill(pid, signal.SIGKILL)
                _, _, usage = os.wait4(pid, 0)
                outcome = "timeout"
            del running[pid]
            _write_module(copy, target["module"], originals[target["module"]])
            free.append(copy)
            row = {**asdict(mutant), "id": mutant.id} if mutant is not None else {"module": target["module"],
                                                                                    "id": "(baseline)"}
            results.append({**row, "outcome": outcome, "killed_by": _killed_by(log) if outcome == "killed" else "",
                            "seconds": round(time.monotonic() - started, 2),
                            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2)})
            if verbose:
                print(f"{outcome:9s} {results[-1]['seconds']:6.1f}s wall {results[-1]['cpu_seconds']:5.1f}s cpu "
                      f"{row['id']} {'' if mutant else target['module']} {results[-1]['killed_by']}", flush=True)
        time.sleep(0.02)
    return results


def execute(plan_file: Path, results_file: Path) -> None:
    """The executor (a fresh interpreter started by :func:`run`): preload, copy the repository once
    per job slot, run the baseline (unless skipped) and the mutants, write the results as JSON."""
    plan = json.loads(plan_file.read_text())
    sys.dont_write_bytecode = True
    for name in plan["preload"]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    gc.freeze()  # the preloaded objects out of every child's collections (pytest collects at its exit)
    root, targets = Path(plan["root"]), {t["module"]: t for t in plan["targets"]}
    mutants = [(targets[m["module"]], Mutant(**m)) for m in plan["mutants"]]
    timeout, results = plan["timeout"], []
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        copies = [_copy_repo(root, Path(tmp) / f"repo{i}") for i in range(plan["jobs"])]
        sources = {module: (copies[0] / module).read_text() for module in targets}
        timeouts = {module: timeout for module in targets}
        if not plan["skip_baseline"]:  # the unmutated tests must pass; a mutant then gets 3x their time + 10 s
            passing = set()
            for r in _run_jobs([(t, None, timeout * 4) for t in targets.values()], copies, sources, Path(tmp),
                               plan["verbose"]):
                if r["outcome"] == "survived":
                    passing.add(r["module"])
                    timeouts[r["module"]] = min(timeout, 3 * r["cpu_seconds"] + 10)
                else:
                    print(f"{r['module']}: the unmutated tests do not pass ({r['outcome']}); skipped", file=sys.stderr)
                    results.append({"module": r["module"], "id": "(baseline)", "outcome": "baseline " + r["outcome"]})
            mutants = [(t, m) for t, m in mutants if t["module"] in passing]
        results += _run_jobs([(t, m, timeouts[t["module"]]) for t, m in mutants], copies, sources, Path(tmp),
                            plan["verbose"])
    results_file.write_text(json.dumps(results))


def _run_in_fresh_interpreter(plan: dict) -> list[dict]:
    """Run :func:`execute` in a new interpreter (``python -I``: no PYTHONPATH, no user site, no
    script folder on the path), single-threaded and writing no bytecode, so that no module, thread
    or lock of the calling process (e.g. a pytest session that imported the test files) reaches a
    forked child."""
    with tempfile.TemporaryDirectory(prefix="mutate-plan-") as tmp:
        plan_file, results_file = Path(tmp) / "plan.json", Path(tmp) / "results.json"
        plan_file.write_text(json.dumps(plan))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | SINGLE_THREAD_ENV
        code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import mutate; "
                f"mutate.execute(mutate.Path({str(plan_file)!r}), mutate.Path({str(results_file)!r}))")
        subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp, env=env, check=True)
        return json.loads(results_file.read_text())


def run(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    config = load_config(Path(args.config))
    targets = config["target"]
    if args.module:
        targets = [t for t in targets if t["module"] in args.module]
    jitted = [t["module"] for t in targets if "numba" in (root / t["module"]).read_text()]
    if jitted:  # a kernel compiled from the unmutated code could be reused from the copied cache
        print(f"mutate: {', '.join(jitted)} use numba, whose kernels this tool does not mutate", file=sys.stderr)
        return 2
    equivalent = load_equivalent(Path(args.equivalent))
    plan = []
    for t in targets:
        mutants = enumerate_mutants(t["module"], root)
        if args.ids:  # exactly these mutants (e.g. an earlier run's sample), no sampling
            wanted = {line.strip() for line in Path(args.ids).read_text().splitlines()}
            mutants = [m for m in mutants if m.id in wanted]
        elif args.sample and len(mutants) > args.sample:  # drawn per module before equivalents are dropped: stable
            rng = random.Random(f"{args.seed}:{t['module']}")
            mutants = sorted(rng.sample(mutants, args.sample), key=lambda m: m.index)
        n_equivalent = sum(m.id in equivalent for m in mutants)
        plan.append((t, [m for m in mutants if m.id not in equivalent], n_equivalent))
    if args.list:
        for t, mutants, _ in plan:
            for m in mutants:
                print(m.id)
        return 0
    plan = [p for p in plan if p[1]]
    results = _run_in_fresh_interpreter({
        "root": str(root), "targets": [t for t, _, _ in plan], "preload": config.get("preload", DEFAULT_PRELOAD),
        "mutants": [asdict(m) for _, mutants, _ in plan for m in mutants], "jobs": max(1, args.jobs),
        "timeout": args.timeout, "skip_baseline": args.skip_baseline, "verbose": args.verbose})
    summary = {t["module"]: {"mutants": 0, "killed": 0, "timeout": 0, "equivalent_skipped": n, "survived": []}
               for t, _, n in plan}
    for r in results:
        s = summary[r["module"]]
        if r["id"] == "(baseline)":
            s["baseline"] = r["outcome"]
            continue
        s["mutants"] += 1
        if r["outcome"] in ("killed", "timeout"):
            s[r["outcome"]] += 1
        else:
            s["survived"].append(f"{r['id']} ({r['outcome']})")
    mutant_runs = [r for r in results if "cpu_seconds" in r and r["id"] != "(baseline)"]
    cpu = sum(r["cpu_seconds"] for r in mutant_runs)
    print(f"{len(mutant_runs)} mutants: {cpu:.0f} s of child CPU time (an idle machine with --jobs cores: about "
          f"{cpu / max(1, args.jobs):.0f} s of mutant runs)")
    for module, s in summary.items():
        print(f"{module}: {s['mutants']} run ({s['equivalent_skipped']} listed equivalent, not run): "
              f"{s['killed']} killed, {s['timeout']} timed out, {len(s['survived'])} survived")
        for r in results:
            if r["module"] == module and r["outcome"] == "timeout":
                print(f"    timeout (the tests never finished; counted as detected, not as killed): {r['id']}")
        for sv in s["survived"]:
            print(f"    survived: {sv}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    return 1 if any(s["survived"] or s.get("baseline") for s in summary.values()) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(HERE / "mutation.toml"))
    p.add_argument("--equivalent", default=str(HERE / "mutation_equivalent.txt"))
    p.add_argument("--root", default=str(HERE.parent))
    p.add_argument("--module", action="append", help="only this module (repeatable)")
    p.add_argument("--sample", type=int, default=0, help="at most this many mutants per module (seeded)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=60.0,
                   help=f"CPU seconds per mutant (at most; {WALL_FACTOR}x in wall time)")
    p.add_argument("--ids", help="exactly the mutants whose ids this file lists, one per line (no sampling)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="forked children at a time (one repo copy each)")
    p.add_argument("--skip-baseline", action="store_true", help="do not first check the unmutated tests pass")
    p.add_argument("--list", action="store_true", help="list the mutant ids and stop")
    p.add_argument("--json", help="write all outcomes here")
    p.add_argument("-v", "--verbose", action="store_true")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
