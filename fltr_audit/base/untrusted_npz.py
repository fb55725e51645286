"""Reading a ``.npz`` nobody vouches for (a recording's batch, truth and documents files, a data
cache entry) within a memory budget for the whole file.

Every member's ``.npy`` header is read first -- name, dtype and shape checked against the
caller's rules -- and the file's total cost is summed *as the arrays will be held*, after
widening (an int8 array stored as int64 costs 8 bytes an element, a float16 one stored as float64
as much), before a byte of data is decompressed. A file over its budget, or over what this
machine has available (``fltr_audit.base.resources``), is refused unread. The data is then decompressed
in chunks straight into the widened array (no second copy), exactly as many bytes as declared, so
a deflate bomb stops there. Every failure is one ``FltrError`` naming the file (and the array).
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np

from fltr_audit.errors import FltrError
from fltr_audit.base.resources import check_file_memory

MAX_MEMBERS = 256
"""Arrays one file may hold."""
CHUNK_BYTES = 8 << 20
"""Bytes decompressed at a time."""
_KIND_NAMES = {"f": "float", "i": "int", "u": "uint", "b": "bool", "U": "text"}


class Rule(NamedTuple):
    """What an array may be: dtype ``kinds`` accepted (``"iu"``), the dtype it is held as (None:
    as declared), and its number of dimensions (None: any)."""

    kinds: str
    dtype: type | None
    ndim: int | None


@dataclass(frozen=True)
class _Member:
    """One array of the file as its header declares it."""

    name: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    fortran: bool
    declared: np.dtype
    held: np.dtype

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    @property
    def cost(self) -> int:
        """Bytes the array costs: held (after widening), or decompressed when that is more."""
        return self.count * max(self.declared.itemsize, self.held.itemsize)


def _declared(fh: IO[bytes], where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The shape, order and dtype a ``.npy`` stream's header declares (read up to its data)."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(fh, max_header_size=10_000)
        if version in ((2, 0), (3, 0)):
            return np.lib.format.read_array_header_2_0(fh, max_header_size=10_000)
        raise ValueError(f"unknown .npy version {version}")
    except ValueError as exc:
        raise FltrError(f"{where}: not a plain .npy array ({' '.join(str(exc).split())[:100]})") from None


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, rule: Rule, where: str) -> _Member:
    """The member ``info`` as its header declares it, checked against ``rule`` (no data read)."""
    with zf.open(info) as fh:
        shape, fortran, dtype = _declared(fh, where)
    if dtype.hasobject or dtype.kind not in rule.kinds or dtype.fields is not None or dtype.subdtype is not None:
        expected = "/".join(_KIND_NAMES[k] for k in rule.kinds)
        raise FltrError(f"{where}: dtype {dtype.str} is not allowed here (expected {expected})")
    if any(d < 0 for d in shape):
        raise FltrError(f"{where}: declares the negative shape {tuple(shape)}")
    held = np.dtype(rule.dtype) if rule.dtype is not None else dtype
    return _Member(name, info, tuple(shape), fortran, dtype, held)


def _data(zf: zipfile.ZipFile, m: _Member, where: str) -> np.ndarray:
    """The member's data, decompressed chunk by chunk into its held dtype; the member must end
    there (its CRC-32 is then checked)."""
    out = np.empty(m.count, dtype=m.held)
    size = m.declared.itemsize
    step = max(1, CHUNK_BYTES // size)
    with zf.open(m.info) as fh:
        _declared(fh, where)
        done = 0
        while done < m.count:
            n = min(step, m.count - done)
            block = fh.read(n * size)
            if len(block) != n * size:
                raise FltrError(f"{where}: truncated (declares {m.count * size:,} bytes of data, holds "
                                f"{done * size + len(block):,})")
            out[done:done + n] = np.frombuffer(block, dtype=m.declared)
            done += n
        if fh.read(1):  # at the member's end, which checks its CRC-32
            raise FltrError(f"{where}: holds more data than its header declares")
    return out.reshape(m.shape, order="F" if m.fortran else "C")


def _rule(name: str, rules: dict[str, Rule], prefixed: dict[str, Rule]) -> Rule | None:
    return rules.get(name) or next((r for p, r in prefixed.items() if name.startswith(p)), None)


def _members(zf: zipfile.ZipFile, path: Path, rules: dict[str, Rule], prefixed: dict[str, Rule],
             budget: int | None) -> list[_Member]:
    """Every member of the open file, each header checked (alone within ``budget``), none twice
    and none unknown."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise FltrError(f"{path}: holds {len(infos):,} members, more than the {MAX_MEMBERS} arrays a file may hold")
    members: list[_Member] = []
    for info in infos:
        name = info.filename.removesuffix(".npy")
        where = f"{path}: array {name!r}"
        rule = _rule(name, rules, prefixed)
        if rule is None:
            raise FltrError(f"{where}: not part of the format")
        if any(m.name == name for m in members):
            raise FltrError(f"{where}: stored twice")
        member = _member(zf, info, name, rule, where)
        if budget is not None and member.cost > budget:
            raise FltrError(f"{where}: declares shape {member.shape} ({member.cost:,} bytes as held in memory), "
                            f"above the limit of {budget:,} bytes for one file")
        if rule.ndim is not None and len(member.shape) != rule.ndim:
            raise FltrError(f"{where}: shape {member.shape} has {len(member.shape)} dimensions, expected {rule.ndim}")
        members.append(member)
    return members


def _check_finite(array: np.ndarray, where: str) -> None:
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = "NaN" if np.isnan(array).any() else "an infinite value"
        raise FltrError(f"{where}: holds {bad}")


def read_npz(path: Path, rules: dict[str, Rule], required: tuple[str, ...] = (),
             prefixed: dict[str, Rule] | None = None, *, budget: int | None, skip: tuple[str, ...] = (),
             finite: bool = True) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path``, each named in ``rules`` or starting with a key of
    ``prefixed``, held as their rule says (``skip``: header-checked only, not read).

    FltrError naming the file (and the array) for: an unknown, doubled or ``required`` but missing
    member; a dtype or shape outside its rule; arrays costing more than ``budget`` bytes in total
    after widening (None: no budget but the machine's), or more than the machine has available; a
    float array holding NaN or an infinite value (``finite``); a damaged or truncated file.
    """
    if not path.is_file():
        raise FltrError(f"{path}: no such file")
    if budget is not None and path.stat().st_size > budget + (budget >> 6) + (1 << 20):  # deflate grows data less
        raise FltrError(f"{path}: {path.stat().st_size:,} bytes, larger than any file within the limit of "
                        f"{budget:,} bytes of arrays")
    try:
        with zipfile.ZipFile(path) as zf:
            members = _members(zf, path, rules, prefixed or {}, budget)
            missing = [k for k in required if k not in {m.name for m in members}]
            if missing:
                raise FltrError(f"{path}: missing array {missing[0]!r}")
            members = [m for m in members if m.name not in skip]
            total = sum(m.cost for m in members)
            if budget is not None and total > budget:
                big = max(members, key=lambda m: m.cost)
                raise FltrError(f"{path}: its arrays declare {total:,} bytes as held in memory, after widening "
                                f"(array {big.name!r} of shape {big.shape}: {big.cost:,}), above the limit of "
                                f"{budget:,} bytes for one file")
            check_file_memory(path, total, "reading its arrays")
            out = {}
            for m in members:
                out[m.name] = _data(zf, m, f"{path}: array {m.name!r}")
                if finite:
                    _check_finite(out[m.name], f"{path}: array {m.name!r}")
            return out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, zlib.error) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise FltrError(f"{path}: damaged, or not a .npz ({reason[:120]})") from None
