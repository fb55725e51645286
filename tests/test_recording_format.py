"""The open recording format (docs/recording-format.md): readable without fltr-audit, described
by its JSON Schema, ground truth apart, and every hostile recording refused in one line (issue 23,
families 1-2: declared shapes, deflate bombs, string dtypes) with bounded memory."""

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fltr_audit.cli import main
from fltr_audit.store.recording import MAX_FILE_BYTES, read_recording
from tests.cli_json import cli_result

REPO = Path(__file__).resolve().parents[1]
SMALL = "synthetic:mq2008?queries=120"


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec") / "run"
    assert main(["train", "fpdgd", "--data", SMALL, "--out", str(out), "--rounds", "3", "--clients", "5",
                 "--queries-per-client", "2", "--record-rounds", "1,3", "--defense", "clip(sensitivity=5)",
                 "--quiet"]) == 0
    return out / "recording"


def _copy(recording, tmp_path) -> Path:
    return Path(shutil.copytree(recording, tmp_path / "rec"))


def test_manifest_follows_the_schema_and_declares_the_run(recording):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "recording.schema.json").read_text())
    manifest = json.loads((recording / "manifest.json").read_text())
    jsonschema.validate(manifest, schema)
    assert manifest["algorithm"] == "fpdgd" and manifest["defense"] == "clip(sensitivity=5)"
    assert [r["round"] for r in manifest["rounds"]] == [1, 3]
    assert manifest["ranker"] == {"kind": "linear", "n_features": 46, "hidden": 0}


def test_schema_rejects_a_manifest_missing_a_field(recording):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "recording.schema.json").read_text())
    manifest = json.loads((recording / "manifest.json").read_text())
    del manifest["rounds"][0]["threat_model"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(manifest, schema)


def test_readable_with_numpy_and_json_alone(recording):
    """What the format document promises, read without fltr-audit, equals what fltr-audit reads."""
    manifest = json.loads((recording / "manifest.json").read_text())
    entry = manifest["rounds"][1]
    with np.load(recording / entry["file"], allow_pickle=False) as z:
        plain = {k: z[k] for k in z.files}
    with np.load(recording / manifest["documents"][entry["documents"]]["file"], allow_pickle=False) as z:
        features = z["features"]
    batch = list(read_recording(recording))[1]
    assert batch.view.round == entry["round"] == 3
    np.testing.assert_array_equal(plain["vector"], batch.view.messages.vector)
    np.testing.assert_array_equal(plain["shown"], batch.view.interactions.shown)
    np.testing.assert_array_equal(features, batch.view.documents.features)
    # a shown document id is a row of the features
    assert plain["vector"].shape == (5, features.shape[1]) and plain["shown"].max() < len(features)


def test_ground_truth_lives_apart(recording):
    """The server-view files hold no clicks; the truth files hold them (a writer that put the
    clicks beside the messages would hand them to every attack)."""
    manifest = json.loads((recording / "manifest.json").read_text())
    for entry in manifest["rounds"]:
        with np.load(recording / entry["file"]) as z:
            assert not any("click" in k or "truth" in k for k in z.files)
        with np.load(recording / entry["truth"]) as z:
            assert z["clicks"].dtype == bool and z["clicks"].shape[:1] == (5,)


def _run_bad(capsys, rec, culprit: str) -> str:
    code = main(["attack", str(rec), "--attack", "olsr", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert culprit in err[0] and "Traceback" not in err[0]
    return err[0]


def _edit_manifest(rec: Path, change) -> None:
    manifest = json.loads((rec / "manifest.json").read_text())
    change(manifest)
    (rec / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("field, change", [
    ("rounds[0].threat_model", lambda m: m["rounds"][0].pop("threat_model")),
    ("ranker.n_features", lambda m: m["ranker"].pop("n_features")),
    ("field producer", lambda m: m.pop("producer")),
    ("field version is 2, newer", lambda m: m.update(version=2)),
    ("rounds[1].file", lambda m: m["rounds"][1].update(file="../../etc/passwd")),
    ("rounds[0].documents", lambda m: m["rounds"][0].update(documents=7)),
])
def test_manifest_at_fault_is_named(capsys, recording, tmp_path, field, change):
    rec = _copy(recording, tmp_path)
    _edit_manifest(rec, change)
    _run_bad(capsys, rec, field)


def test_a_recording_before_the_manifest_is_refused_by_version(capsys, recording, tmp_path):
    rec = _copy(recording, tmp_path)
    (rec / "manifest.json").unlink()
    assert "format version 0" in _run_bad(capsys, rec, str(rec))


def _rewrite(path: Path, **changes) -> None:
    """Rewrite the .npz at ``path`` with arrays replaced (None removes one)."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    np.savez_compressed(path, **arrays)


def test_wrong_shape_and_dtype_and_missing_array_are_named(capsys, recording, tmp_path):
    rec = _copy(recording, tmp_path)
    batch = rec / "batch-000001.npz"
    with np.load(batch) as z:
        vector, shown = z["vector"], z["shown"]
    _rewrite(batch, vector=np.zeros((vector.shape[0], vector.shape[1] + 1)))
    assert "'vector'" in _run_bad(capsys, rec, "batch-000001.npz")
    _rewrite(batch, vector=vector.astype(np.float32), shown=shown[..., :-1])  # float32 is fine; k no longer fits
    assert "truth-000001.npz" in _run_bad(capsys, rec, "'clicks'")
    _rewrite(batch, shown=shown, vector=None)
    assert "missing array 'vector'" in _run_bad(capsys, rec, "batch-000001.npz")
    _rewrite(batch, vector=vector, shown=shown + 10**6)
    assert "outside the documents" in _run_bad(capsys, rec, "'shown'")


def _write_member(path: Path, name: str, header: dict, payload: bytes = b"") -> None:
    """Replace the member ``name`` of the zip at ``path`` by a .npy with ``header`` and ``payload``."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(path) as z:
        others = {n: z.read(n) for n in z.namelist() if n != name}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in others.items():
            z.writestr(n, data)
        z.writestr(name, buf.getvalue() + payload)


def _attack_in_child(rec: Path) -> tuple[int, list[str], float]:
    """``fltr-audit attack rec`` in a fresh interpreter: exit code, stderr lines, peak RSS (MB).

    The peak is the child's own ``VmHWM``: ``getrusage``'s ``ru_maxrss`` survives ``execve`` on
    Linux, so a child of a large pytest process would report its parent's peak."""
    script = ("import re, sys\nfrom fltr_audit.cli import main\ncode = main(sys.argv[1:])\n"
              "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
              "print(int(hwm) / 1024)\nsys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script, "attack", str(rec), "--attack", "olsr", "--quiet"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, lines, float(done.stdout.split()[-1])


def _assert_refused_lean(rec: Path, culprit: str) -> str:
    code, lines, rss = _attack_in_child(rec)
    assert code == 2 and len(lines) == 1, lines
    assert culprit in lines[0] and "Traceback" not in lines[0]
    assert rss < 500, f"peak RSS {rss:.0f} MB"
    return lines[0]


def test_declared_shape_of_a_trillion_is_refused_unread(recording, tmp_path):
    rec = _copy(recording, tmp_path)
    _write_member(rec / "batch-000001.npz", "vector.npy",
                  {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    line = _assert_refused_lean(rec, "batch-000001.npz")
    assert "'vector'" in line and "limit" in line


def test_declared_size_above_the_cap_is_refused_before_decompressing(recording, tmp_path):
    rec = _copy(recording, tmp_path)
    n = MAX_FILE_BYTES // 8 + 1
    _write_member(rec / "documents-0.npz", "features.npy",
                  {"descr": "<f4", "fortran_order": False, "shape": (n, 2)}, bytes(1000))
    assert "'features'" in _assert_refused_lean(rec, "documents-0.npz")


def test_a_one_gib_deflate_bomb_member_is_refused_in_bounded_memory(recording, tmp_path):
    rec = _copy(recording, tmp_path)
    target = rec / "batch-000001.npz"
    with zipfile.ZipFile(target) as z:
        others = {n: z.read(n) for n in z.namelist() if n != "vector.npy"}
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for n, data in others.items():
            z.writestr(n, data)
        with z.open("vector.npy", "w", force_zip64=True) as fh:  # 1 GiB of NULs, a few MB on disk
            chunk = bytes(1 << 24)
            for _ in range(64):
                fh.write(chunk)
    assert target.stat().st_size < 20 * 2**20
    assert "'vector'" in _assert_refused_lean(rec, "batch-000001.npz")


def test_a_header_that_understates_the_payload_reads_only_what_it_declares(capsys, recording, tmp_path):
    """A member whose header declares 10 floats followed by megabytes of data: the 10 are read, the
    shape check then names the array (the reader never reads to the member's end)."""
    rec = _copy(recording, tmp_path)
    _write_member(rec / "batch-000001.npz", "global_params.npy",
                  {"descr": "<f8", "fortran_order": False, "shape": (10,)}, bytes(8 * 2**20))
    assert "'global_params'" in _run_bad(capsys, rec, "batch-000001.npz")


@pytest.mark.parametrize("name, array", [
    ("vector", np.array([["abcdefghij"] * 46] * 5, dtype="<U10")),
    ("participants", np.array([b"x"] * 5, dtype="S1")),
    ("vector", np.zeros((5, 46), dtype=[("a", "<f8")])),
])
def test_string_and_record_dtypes_are_refused(capsys, recording, tmp_path, name, array):
    rec = _copy(recording, tmp_path)
    _rewrite(rec / "batch-000001.npz", **{name: array})
    line = _run_bad(capsys, rec, "batch-000001.npz")
    assert f"'{name}'" in line and "dtype" in line


def test_string_dtype_is_refused_lean_in_a_child(recording, tmp_path):
    rec = _copy(recording, tmp_path)
    _rewrite(rec / "truth-000001.npz", clicks=np.full((5, 2, 10), "yes", dtype="<U10"))
    assert "'clicks'" in _assert_refused_lean(rec, "truth-000001.npz")


def test_an_unknown_member_is_refused(capsys, recording, tmp_path):
    rec = _copy(recording, tmp_path)
    _rewrite(rec / "batch-000001.npz", secret=np.zeros(3))
    assert "'secret'" in _run_bad(capsys, rec, "batch-000001.npz")


def test_a_folder_of_recordings_is_attacked_whole(capsys, recording, tmp_path):
    """Per-client recordings (as the Flower mod writes them) side by side: one row per round each."""
    parent = tmp_path / "clients"
    for name in ("node-1", "node-2"):
        shutil.copytree(recording, parent / name)
    assert main(["attack", str(parent), "--attack", "olsr", "--json", "--quiet"]) == 0
    rows = cli_result(capsys.readouterr().out)["rounds"]
    assert [r["round"] for r in rows] == [1, 3, 1, 3]
