"""The mutants of tools/mutate.py: what a mutant is (one changed node of one module, named by its
id), every mutant of a module, and a module's source with one mutant applied.

Each mutant changes one node: a comparison operator flipped (< <=, > >=, == !=, < >), an arithmetic
operator swapped (+ -, * /, // /, ** *), a numeric constant changed (+1, x2; not parameter defaults),
a boolean operator swapped (and or), a ``not`` or unary minus dropped, an ``if`` branch dropped (its
test made ``False``) or an ``else`` branch dropped.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

COMPARE_SWAPS = {ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt,), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt,),
                 ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
                 ast.In: (ast.NotIn,), ast.NotIn: (ast.In,)}
BINOP_SWAPS = {ast.Add: (ast.Sub,), ast.Sub: (ast.Add,), ast.Mult: (ast.Div,), ast.Div: (ast.Mult,),
               ast.FloorDiv: (ast.Div,), ast.Pow: (ast.Mult,), ast.Mod: (ast.FloorDiv,),
               ast.LShift: (ast.RShift,), ast.RShift: (ast.LShift,), ast.BitAnd: (ast.BitOr,)}


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int       # position of the node in the module's ast.walk order
    line: int
    kind: str        # e.g. "Lt->LtE", "const 2->3", "drop-if", "drop-else"

    @property
    def id(self) -> str:
        return f"{self.module}:{self.line}:{self.kind}#{self.index}"


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Docstrings, and default values of parameters (a default is a user-facing choice, e.g. a
    paper's epsilon, not privacy arithmetic; the tests pass their parameters explicitly)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            for default in [*node.defaults, *[d for d in node.kw_defaults if d is not None]]:
                out.update(id(n) for n in ast.walk(default))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _options(node: ast.AST) -> list[str]:
    """The mutations possible at one node (each a ``kind`` string)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return [f"{type(node.ops[0]).__name__}->{t.__name__}" for t in COMPARE_SWAPS.get(type(node.ops[0]), ())]
    if isinstance(node, ast.BinOp):
        return [f"{type(node.op).__name__}->{t.__name__}" for t in BINOP_SWAPS.get(type(node.op), ())]
    if isinstance(node, ast.AugAssign):
        return [f"aug {type(node.op).__name__}->{t.__name__}" for t in BINOP_SWAPS.get(type(node.op), ())]
    if isinstance(node, ast.BoolOp):
        return ["And->Or" if isinstance(node.op, ast.And) else "Or->And"]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        return [f"drop {type(node.op).__name__}"]
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
        return list(dict.fromkeys([f"const {v!r}->{v + 1!r}", f"const {v!r}->{v * 2!r}"])) if v != 0 else [f"const {v!r}->1"]
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        return [f"const {node.value}->{not node.value}"]
    if isinstance(node, ast.If):
        return ["drop-if"] + (["drop-else"] if node.orelse else [])
    return []


def enumerate_mutants(module: str, root: Path) -> list[Mutant]:
    tree = ast.parse((root / module).read_text())
    skip = _skipped_nodes(tree)
    out = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for kind in _options(node):
            out.append(Mutant(module, index, getattr(node, "lineno", 0), kind))
    return out


def mutated_source(mutant: Mutant, root: Path, source: str | None = None) -> str:
    """The module's source (``source``, else read from ``root``) with the mutant applied; always
    mutate the pristine source: node indexes shift in a tree another mutant has changed."""
    tree = ast.parse((root / mutant.module).read_text() if source is None else source)
    node = list(ast.walk(tree))[mutant.index]
    kind = mutant.kind
    if isinstance(node, ast.Compare):
        node.ops = [getattr(ast, kind.split("->")[1])()]
    elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = getattr(ast, kind.split("->")[1])()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        _replace(tree, node, node.operand)
    elif isinstance(node, ast.Constant):
        v = node.value
        node.value = (not v) if type(v) is bool else (1 if v == 0 else (v + 1 if kind.endswith(repr(v + 1)) else v * 2))
    elif isinstance(node, ast.If):
        if kind == "drop-if":
            node.test = ast.Constant(False)
        else:
            node.orelse = []
    return ast.unparse(ast.fix_missing_locations(tree))


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
