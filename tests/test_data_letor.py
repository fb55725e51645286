"""LETOR text reading and writing: round trips, oracles and malformed files."""

import gzip
import random
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from fltr_audit.engine.data.dataset import Dataset
from fltr_audit.engine.data.letor import read_letor
from fltr_audit.engine.data.letor_write import format_letor, write_letor
from fltr_audit.engine.data.synthetic import generate
from fltr_audit.errors import FltrError


def assert_same(a: Dataset, b: Dataset) -> None:
    assert a.features.dtype == b.features.dtype == np.float32
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.query_ptr, b.query_ptr)
    np.testing.assert_array_equal(a.qids, b.qids)
    assert a.n_levels == b.n_levels


@pytest.mark.parametrize("profile,queries", [("mq2008", 60), ("mslr10k", 8), ("yahoo", 6)])
def test_synthetic_round_trip_is_bit_identical(tmp_path, profile, queries):
    ds = generate(profile, queries, seed=3)
    write_letor(ds, tmp_path / "x.txt")
    assert_same(read_letor(tmp_path / "x.txt"), ds)


def test_round_trip_of_arbitrary_float32_and_gzip_and_doc_ids(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.array([0, 4, 1, 2, 0, 3, 1, 0], dtype=np.int8)
    ds = Dataset(
        features=(rng.standard_normal((8, 5)) * 10.0 ** rng.integers(-8, 8, (8, 5))).astype(np.float32),
        labels=labels,
        query_ptr=np.array([0, 3, 4, 8]),
        qids=np.array([7, 3, 11]),
        n_levels=5,
        doc_ids=np.array([f"D{i}-x" for i in range(8)]),
    )
    write_letor(ds, tmp_path / "x.txt.gz")
    assert gzip.open(tmp_path / "x.txt.gz").read() == format_letor(ds)
    back = read_letor(tmp_path / "x.txt.gz")
    assert_same(back, ds)
    np.testing.assert_array_equal(back.doc_ids, ds.doc_ids)


def test_mq2008_file_matches_sklearn_reader(mq2008_dir):
    path = mq2008_dir / "Fold1" / "vali.txt"
    X, y, q = load_svmlight_file(str(path), query_id=True)
    ds = read_letor(path)
    np.testing.assert_array_equal(ds.features, X.toarray().astype(np.float32))
    np.testing.assert_array_equal(ds.labels, y.astype(np.int8))
    np.testing.assert_array_equal(np.repeat(ds.qids, ds.docs_per_query), q)
    first = path.read_text().split("\n", 1)[0]
    assert ds.doc_ids[0] == re.search(r"#docid = (\S+)", first).group(1)
    assert len(ds.doc_ids) == ds.n_docs


def test_sparse_file_matches_sklearn_and_regroups_queries(tmp_path):
    text = "0 qid:5 1:0.5 3:1\n# a comment line\n\n1 qid:2 2:0.25\n2 qid:5 1:1 2:1 3:1 4:2\n1 qid:2 4:3\n"
    (tmp_path / "s.txt").write_text(text)
    ds = read_letor(tmp_path / "s.txt")
    X, y, q = load_svmlight_file(str(tmp_path / "s.txt"), query_id=True)
    order = [0, 2, 1, 3]  # qid 5's rows first (first appearance), then qid 2's, file order kept
    np.testing.assert_array_equal(ds.features, X.toarray()[order].astype(np.float32))
    np.testing.assert_array_equal(ds.labels, y[order])
    np.testing.assert_array_equal(ds.qids, [5, 2])
    np.testing.assert_array_equal(ds.query_ptr, [0, 2, 4])
    assert ds.n_levels == 3


def _mq_like(tmp_path: Path, edit) -> Path:
    rng = np.random.default_rng(1)
    lines = [
        f"{rng.integers(0, 3)} qid:{1 + i // 10} "
        + " ".join(f"{j}:{v:.6f}" for j, v in enumerate(rng.random(46), start=1))
        + f" #docid = GX{i}"
        for i in range(100)
    ]
    lines[56] = edit(lines[56])
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda s: re.sub(r" 46:\S+", "", s), "45 features, expected 46"),
        (lambda s: s.replace(" #docid", " 47:0.5 #docid"), "47 features, expected 46"),
        (lambda s: re.sub(r" 3:\S+", " 3:nan", s), "NaN"),
        (lambda s: re.sub(r"qid:\d+ ", "", s), "qid"),
        (lambda s: "1.5" + s[1:], "label"),
        (lambda s: s.replace(" 7:", " 7:x"), "7:x"),
        (lambda s: s.replace(" 9:", " 9:inf "), "inf"),
    ],
    ids=["45-features", "47-features", "nan", "no-qid", "fractional-label", "bad-token", "infinite"],
)
def test_malformed_line_names_file_and_line(tmp_path, edit, words):
    path = _mq_like(tmp_path, edit)
    with pytest.raises(FltrError) as err:
        read_letor(path)
    message = str(err.value)
    assert str(path) in message and "line 57" in message and words in message
    assert "\n" not in message


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FltrError, match="nope.txt"):
        read_letor(tmp_path / "nope.txt")
    (tmp_path / "e.txt").write_text("# nothing\n\n")
    with pytest.raises(FltrError, match="no data lines"):
        read_letor(tmp_path / "e.txt")


def test_line_length_check_agrees_with_splitting_the_lines():
    """The windowed search for an over-long line (``_check_line_lengths``) against a brute-force
    split: same first line named, or none, on lines at and around the cap."""
    from fltr_audit.engine.data import letor

    cap = letor.MAX_LINE_BYTES
    rng = random.Random(0)
    lengths = [0, 5, cap // 2, cap // 2 + 1, cap - 1, cap, cap + 1, 3 * cap // 2, 2 * cap]
    for _ in range(200):
        parts = [b"x" * rng.choice(lengths + [rng.randint(0, 3 * cap)]) for _ in range(rng.randint(1, 6))]
        chunk = b"\n".join(parts)
        expected = next((7 + i + 1 for i, p in enumerate(parts) if len(p) > cap), None)
        try:
            letor._check_line_lengths(Path("f.txt"), chunk, 7)
            got = None
        except FltrError as exc:
            got = int(str(exc).split("line ")[1].split(":")[0])
        assert got == expected, [len(p) for p in parts]
