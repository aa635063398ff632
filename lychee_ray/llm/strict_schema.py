"""A reply model's JSON schema in the form OpenAI's strict structured output accepts.

Strict mode asks of a schema: every object closes (``additionalProperties: false``) and requires
all of its properties, a ``$ref`` stands alone (a reference with sibling keys such as a
description is replaced by the definition it names, siblings winning), a one-entry ``allOf`` is
merged into its parent, and a ``null`` default says nothing (the field stays nullable). These are
the rules of the ``openai`` library's own converter (the one ``.parse()`` uses), written here so that
a schema — and the offline prompt-token estimates that count it — needs no import of the ``openai``
package, which costs about a second (``tests/llm/test_strict_schema.py`` checks both agree).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema made strict (module doc); TypeError / ValueError when it cannot be."""
    schema = model.model_json_schema()
    return _strict(schema, schema)


def _strict(node: object, root: dict[str, Any]) -> dict[str, Any]:
    """``node`` made strict in place (and returned); ``root`` resolves its ``$ref``s."""
    if not isinstance(node, dict):
        raise TypeError(f"expected a JSON schema object, got {node!r}")
    for defs_key in ("$defs", "definitions"):
        defs = node.get(defs_key)
        if isinstance(defs, dict):
            for sub in defs.values():
                _strict(sub, root)
    if node.get("type") == "object" and "additionalProperties" not in node:
        node["additionalProperties"] = False
    props = node.get("properties")
    if isinstance(props, dict):
        node["required"] = list(props)
        node["properties"] = {k: _strict(v, root) for k, v in props.items()}
    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = _strict(items, root)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        node["anyOf"] = [_strict(v, root) for v in any_of]
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        if len(all_of) == 1:
            node.update(_strict(all_of[0], root))
            node.pop("allOf")
        else:
            node["allOf"] = [_strict(v, root) for v in all_of]
    if "default" in node and node["default"] is None:
        node.pop("default")
    ref = node.get("$ref")
    if ref and len(node) > 1:
        resolved = _resolve(root, ref)
        node.update({**resolved, **node})  # the node's own keys win over the definition's
        node.pop("$ref")
        return _strict(node, root)  # the inlined definition needs the same rules
    return node


def _resolve(root: dict[str, Any], ref: object) -> dict[str, Any]:
    """The definition a local ``#/...`` reference names."""
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise ValueError(f"unexpected $ref {ref!r} (only local '#/...' references are resolved)")
    found: object = root
    for key in ref[2:].split("/"):
        if not isinstance(found, dict) or key not in found:
            raise ValueError(f"$ref {ref!r} names nothing in the schema")
        found = found[key]
    if not isinstance(found, dict):
        raise ValueError(f"$ref {ref!r} names no schema object")
    return found


__all__ = ["strict_json_schema"]
