"""Bad-input family: user files read by arrays (issue 39, items 1, 5 and 9): a recording's batch,
truth and documents files, and the data cache. Memory is bounded per file as the arrays will be
held (after widening), from the headers, before any data is read; non-finite arrays, damaged
deflate streams and manifests that ask for more work than the folder holds are each one line
naming the file (and the array or field), exit 2. Commands run in-process (``run_bad``); the peak
RSS of the same bombs in a fresh process is measured in ``test_bad_inputs_memory.py``."""

from __future__ import annotations

import io
import json
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fltr_audit.cli import main
from fltr_audit.store.recording import MAX_FILE_BYTES
from tests.test_bad_inputs import run_bad  # noqa: F401 (the fixture)

SMALL = "synthetic:mq2008?queries=50"


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A real two-round FPDGD recording (4 clients, 2 queries each) to damage."""
    out = tmp_path_factory.mktemp("rec") / "run"
    assert main(["train", "fpdgd", "--data", SMALL, "--out", str(out), "--rounds", "2", "--clients", "4",
                 "--queries-per-client", "2", "--record-rounds", "every:1", "--quiet"]) == 0
    return out / "recording"


def npy(header: dict, payload: bytes = b"") -> bytes:
    """A ``.npy`` member: ``header`` (descr, fortran_order, shape) then ``payload`` (maybe short)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + payload


def replace_members(path: Path, members: dict[str, bytes | None]) -> None:
    """Rewrite the zip at ``path`` with ``members`` (name -> .npy bytes; None drops one) replaced or added."""
    with zipfile.ZipFile(path) as z:
        kept = {n: z.read(n) for n in z.namelist() if n not in members}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**kept, **{k: v for k, v in members.items() if v is not None}}.items():
            z.writestr(name, data)


def rewrite_arrays(path: Path, **arrays: np.ndarray) -> None:
    with np.load(path) as z:
        kept = {k: z[k] for k in z.files}
    np.savez_compressed(path, **{**kept, **arrays})


def copy(recording: Path, work: Path) -> Path:
    return Path(shutil.copytree(recording, work / "rec"))


def attack(rec: Path) -> list:
    return ["attack", rec, "--attack", "olsr", "--quiet"]


# --- item 1: the memory an input costs, in total and after widening ---------------------------

def widened_bomb(rec: Path) -> str:
    """``queries`` and ``shown`` declared int8, 64 MiB each: together half the limit as declared, 1 GiB
    held as int64 (a reader that sums declared bytes would accept them)."""
    n = MAX_FILE_BYTES // 4
    replace_members(rec / "batch-000001.npz", {
        "queries.npy": npy({"descr": "|i1", "fortran_order": False, "shape": (n, 1)}),
        "shown.npy": npy({"descr": "|i1", "fortran_order": False, "shape": (n, 1, 1)})})
    return "batch-000001.npz"


def float16_bomb(rec: Path) -> str:
    """``vector`` declared float16: 128 MiB declared, 512 MiB held as float64."""
    replace_members(rec / "batch-000001.npz", {
        "vector.npy": npy({"descr": "<f2", "fortran_order": False, "shape": (2**22, 16)})})
    return "batch-000001.npz"


def private_bomb(rec: Path) -> str:
    """Ten ``private_*`` arrays of 250 MiB each in a truth file, each alone under the limit."""
    replace_members(rec / "truth-000001.npz", {
        f"private_{i}.npy": npy({"descr": "<f8", "fortran_order": False, "shape": (250 * 2**17,)})
        for i in range(10)})
    return "truth-000001.npz"


def documents_bomb(rec: Path) -> str:
    """``features`` and ``labels`` of the documents file, together over the limit."""
    rows = MAX_FILE_BYTES // (4 * 46) - 10
    replace_members(rec / "documents-0.npz", {
        "features.npy": npy({"descr": "<f4", "fortran_order": False, "shape": (rows, 46)}),
        "labels.npy": npy({"descr": "|u1", "fortran_order": False, "shape": (rows,)})})
    return "documents-0.npz"


MEMORY_BOMBS = {"int8-widened-to-int64": widened_bomb, "float16-widened-to-float64": float16_bomb,
                "ten-private-arrays": private_bomb, "documents-over-the-limit": documents_bomb}


@pytest.mark.parametrize("bomb", MEMORY_BOMBS)
def test_a_file_over_the_memory_limit_after_widening_is_refused_unread(run_bad, recording, bomb):
    rec = copy(recording, run_bad.work)
    culprit = MEMORY_BOMBS[bomb](rec)
    line = run_bad(attack(rec), culprit)
    assert "above the limit" in line and ("after widening" in line or "declares shape" in line), line


def test_negative_declared_shape_is_refused(run_bad, recording):
    rec = copy(recording, run_bad.work)
    replace_members(rec / "batch-000001.npz",
                    {"vector.npy": npy({"descr": "<f8", "fortran_order": False, "shape": (-4, 46)}, bytes(64))})
    assert "negative shape" in run_bad(attack(rec), "batch-000001.npz")


def test_too_many_members_are_refused_before_any_is_read(run_bad, recording):
    rec = copy(recording, run_bad.work)
    replace_members(rec / "truth-000001.npz", {f"private_{i}.npy": npy(
        {"descr": "<f8", "fortran_order": False, "shape": (1,)}, bytes(8)) for i in range(300)})
    assert "members" in run_bad(attack(rec), "truth-000001.npz")


def test_a_member_stored_twice_is_refused(run_bad, recording):
    rec = copy(recording, run_bad.work)
    with zipfile.ZipFile(rec / "batch-000001.npz", "a") as z, pytest.warns(UserWarning, match="Duplicate"):
        z.writestr("dropouts.npy", npy({"descr": "<i8", "fortran_order": False, "shape": (0,)}))
    assert "stored twice" in run_bad(attack(rec), "batch-000001.npz")


def test_a_file_larger_on_disk_than_any_file_within_the_limit_is_refused_unopened(run_bad, recording):
    rec = copy(recording, run_bad.work)
    with open(rec / "truth-000002.npz", "ab") as fh:  # a sparse tail: no disk used
        fh.truncate(MAX_FILE_BYTES * 2)
    assert "larger than any file" in run_bad(attack(rec), "truth-000002.npz")


def test_a_file_the_machine_cannot_hold_is_refused_naming_it(run_bad, recording, monkeypatch):
    rec = copy(recording, run_bad.work)
    monkeypatch.setenv("FLTR_AUDIT_MEMORY", "1000")  # this machine: 1 kB available
    assert "more than this machine can give" in run_bad(attack(rec), "documents-0.npz")


# --- item 5: corrupt and non-finite values are the file's, named ------------------------------

@pytest.mark.parametrize("name, file, value", [("global_params", "batch-000001.npz", np.nan),
                                               ("vector", "batch-000002.npz", np.inf),
                                               ("features", "documents-0.npz", -np.inf),
                                               ("private_x", "truth-000001.npz", np.nan)])
def test_a_non_finite_array_is_refused_naming_file_and_array(run_bad, recording, name, file, value):
    rec = copy(recording, run_bad.work)
    with np.load(rec / file) as z:
        array = z[name].copy() if name in z.files else np.zeros(3)
    array.flat[array.size // 2] = value
    rewrite_arrays(rec / file, **{name: array})
    line = run_bad(attack(rec), file)
    assert f"array {name!r}" in line and ("NaN" in line or "infinite" in line) and "--attack" not in line, line


def test_corrupted_bytes_in_a_batch_are_one_line_naming_the_file(run_bad, recording):
    rec = copy(recording, run_bad.work)
    batch = rec / "batch-000002.npz"
    data = bytearray(batch.read_bytes())
    with zipfile.ZipFile(batch) as z:
        info = z.getinfo("vector.npy")
    start = info.header_offset + 30 + len(info.filename) + 40  # inside the member's deflate stream
    data[start:start + 30] = bytes(range(200, 230))
    batch.write_bytes(bytes(data))
    assert "internal error" not in run_bad(attack(rec), "batch-000002.npz")


# --- item 9: a manifest asks for no more work than the folder holds ---------------------------

def test_a_manifest_listing_one_batch_for_5000_rounds_is_refused_at_once(run_bad, recording):
    rec = copy(recording, run_bad.work)
    manifest = json.loads((rec / "manifest.json").read_text())
    manifest["rounds"] = [{**manifest["rounds"][0], "round": r} for r in range(1, 5001)]
    (rec / "manifest.json").write_text(json.dumps(manifest))
    start = time.monotonic()
    line = run_bad(attack(rec), "rounds[1].file")
    assert "names the file of rounds[0].file again" in line and time.monotonic() - start < 30


def test_a_truth_file_named_as_another_rounds_batch_is_refused(run_bad, recording):
    rec = copy(recording, run_bad.work)
    manifest = json.loads((rec / "manifest.json").read_text())
    manifest["rounds"][1]["truth"] = "./" + manifest["rounds"][0]["file"]
    (rec / "manifest.json").write_text(json.dumps(manifest))
    assert "rounds[0].file" in run_bad(attack(rec), "rounds[1].truth")


# --- the data cache: an entry that is not what we wrote is rebuilt, never trusted -------------

def test_a_planted_cache_entry_declaring_huge_arrays_is_rebuilt(tmp_path, monkeypatch, capsys):
    from fltr_audit.engine.data import cache
    from tests.test_bad_inputs import GOOD

    monkeypatch.setenv("FLTR_AUDIT_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    assert main(["data", "info", str(data), "--json"]) == 0
    first = capsys.readouterr().out
    (entry,) = (tmp_path / "cache").glob("*.npz")
    replace_members(entry, {"labels.npy": npy({"descr": "|i1", "fortran_order": False, "shape": (10**12,)}),
                            "qids.npy": npy({"descr": "<U4", "fortran_order": False, "shape": (3,)})})
    with pytest.raises(ValueError):
        cache._load(entry, str(data))
    assert main(["data", "info", str(data), "--json"]) == 0
    assert capsys.readouterr().out == first
    assert cache._load(entry, str(data)).n_docs == 60  # rebuilt
