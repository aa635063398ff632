"""Names as types: each closed set of names (lychee_ray/names.py, core/status.py) is written once.

A module compares a backend, a dataset or an exchange mode with the constant, not with the string, and
spells no ``Literal`` of one of these sets again (a new value is added in one place).
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import lychee_ray.core.status as status
import lychee_ray.names as names

PKG = Path(__file__).resolve().parents[2] / "lychee_ray"
DEFINERS = {PKG / "names.py", PKG / "core" / "status.py"}

# Every closed set: the values of each Literal type the two modules define.
SETS: dict[str, frozenset[str]] = {
    n: frozenset(typing.get_args(v)) for mod in (names, status) for n, v in vars(mod).items()
    if typing.get_origin(v) is typing.Literal
}
# The values a comparison may not spell: which words in the compared expression make it one of these
# names (a backend compared with "openai" is a name; a role compared with "user" may be anything).
COMPARED: list[tuple[tuple[str, ...], frozenset[str]]] = [
    (("backend",), SETS["LLMBackend"] | SETS["EmbeddingBackend"]),
    (("runner",), SETS["Runner"]),
    (("dataset", "ds.name"), SETS["DatasetName"]),
    (("exchange_mode", "requested", "segmenter_mode", "self.mode"), SETS["ExchangeModeChoice"]),
    (("scope",), SETS["Scope"]),
    (("on_conflict",), SETS["OnConflict"]),
    (("work.route",), SETS["WriteRoute"]),
    (("judge_protocol", "protocol"), SETS["JudgeProtocol"]),
    (("status",), SETS["Status"]),
]


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts and p not in DEFINERS)


def _literal_values(node: ast.Subscript) -> frozenset[str] | None:
    if not (isinstance(node.value, ast.Name) and node.value.id == "Literal"
            or isinstance(node.value, ast.Attribute) and node.value.attr == "Literal"):
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    vals = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return frozenset(vals) if len(vals) == len(elts) else None


def test_the_sets_are_found():
    assert {"LLMBackend", "EmbeddingBackend", "DatasetName", "ExchangeMode", "Status"} <= set(SETS)
    assert names.DATASETS == ("locomo", "longmemeval", "beam")


def test_no_module_spells_a_literal_of_a_named_set_again():
    bad, seen = [], {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            vals = _literal_values(node) if isinstance(node, ast.Subscript) else None
            if vals is None:
                continue
            where = f"{p.relative_to(PKG)}:{node.lineno}"
            same = [n for n, s in SETS.items() if s == vals]
            if same:
                bad.append(f"{where} Literal{sorted(vals)} is names.{same[0]}")
            elif vals in seen:  # a set of names needed twice is defined once, and named
                bad.append(f"{where} Literal{sorted(vals)} is also written at {seen[vals]}")
            seen.setdefault(vals, where)
    assert not bad, "\n".join(bad)


def test_no_module_compares_a_name_with_its_string():
    bad = []
    for p in _modules():
        src = p.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, ast.Compare) or len(node.comparators) != 1 or \
                    not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
                continue
            left, right = node.left, node.comparators[0]
            for const, other in ((right, left), (left, right)):
                if not (isinstance(const, ast.Constant) and isinstance(const.value, str)):
                    continue
                text = ast.get_source_segment(src, other) or ""
                for words, values in COMPARED:
                    if const.value in values and any(w in text for w in words):
                        bad.append(f"{p.relative_to(PKG)}:{node.lineno} {text} == {const.value!r}")
    assert not bad, "compare with the constant of lychee_ray/names.py:\n" + "\n".join(bad)


def test_the_dataset_formats_are_registered_under_the_dataset_names():
    from lychee_ray.io.adapters.registry import format_names

    assert set(names.DATASETS) <= set(format_names())
