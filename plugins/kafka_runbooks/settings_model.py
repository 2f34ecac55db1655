"""The settings as one typed model (pydantic v2), derived from the dataclasses of ``config.py`` so there is one list of
settings: every field's type, its default and its comment there become the model, its checks and its JSON Schema
(``docs/settings.schema.json``, written by ``kafka-runbooks schema``).

This module imports nothing of the product: each function takes the cluster's dataclass (``root``, config's
``ClusterConfig``) and reads what it needs from it (its fields and their comments, and its class attributes
``NAME_PATTERN``, ``RETIRED``, ``ARGV_FIELDS``); ``config.py`` runs :func:`errors` on every cluster it reads.

Strict: ``"false"`` is not a boolean, ``"2"`` is not a number, a string is not a list, ``hosts`` needs at least one
broker and every broker a connection id; unknown and retired keys are refused by name. Every error names the cluster,
the path of the setting and what was expected. The range and consistency checks (``> 0``, cron expressions, windows)
stay in ``config.py``'s ``from_dict``, which runs after this model accepted the shapes.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import types
import typing
from typing import Annotated, Any, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationError, create_model

SCHEMA_ID = "https://kafka-runbooks.invalid/settings.schema.json"
_Str = Annotated[str, Strict()]
_NonEmpty = Annotated[str, Strict(), StringConstraints(min_length=1)]
_Int = Annotated[int, Strict()]
_Float = Annotated[float, Strict()]  # an integer is a number too; a bool or a string is not
_Bool = Annotated[bool, Strict()]
# a broker id: "1" in JSON (object keys are strings), 1 from Python
_BrokerId = Union[Annotated[str, Strict(), StringConstraints(pattern=r"^[0-9]{1,9}$")], Annotated[int, Strict(), Field(ge=0)]]
_ServerId = Annotated[str, Strict(), StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

_SCALARS = {int: _Int, float: _Float, bool: _Bool, str: _Str}
# what each field's error says was expected, by pydantic's error type
_EXPECTED = {
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "missing": "missing: a required setting",
    "extra_forbidden": "unknown setting",
    "too_short": "expected at least one entry",
    "string_too_short": "expected a non-empty string",
    "broker_id": "expected a broker id (a number, as a string in JSON)",
}


def _comments(cls: type) -> dict[str, str]:
    """``{field: the comment on its line}`` from the dataclass's source: the schema's descriptions."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out = {}
    for m in re.finditer(r"^    (\w+): [^#\n]*?#\s*(.+)$", source, re.M):
        out[m.group(1)] = m.group(2).strip()
    return out


def _field_type(hint: Any, name: str, root: type) -> Any:
    """The strict pydantic type of one dataclass field's type hint."""
    if hint in _SCALARS:
        return _SCALARS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = Union[tuple(_field_type(a, name, root) for a in rest)] if len(rest) > 1 else _field_type(rest[0], name, root)
        return inner | None if type(None) in args else inner
    if origin is tuple:
        return list[_field_type(args[0], name, root)]
    if origin in (Mapping, dict, typing.Mapping) or origin is getattr(__import__("collections.abc").abc, "Mapping"):
        key, value = args
        if dataclasses.is_dataclass(value):  # zookeeper.servers: {server id: {address, ...} or "host:port"}
            return dict[_ServerId, Union[section_model(value, root), _NonEmpty]]
        return dict[_field_type(key, name, root), _field_type(value, name, root)]
    if dataclasses.is_dataclass(hint):
        return section_model(hint, root)
    raise TypeError(f"settings field {name!r}: no strict type for {hint!r}")


@functools.cache
def section_model(cls: type, root: type) -> type[BaseModel]:
    """The strict model of one settings dataclass (a section, or the cluster itself: ``root``)."""
    hints = typing.get_type_hints(cls)
    notes = _comments(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if cls is root and f.name == "name":
            continue  # the key of the cluster in the settings, not a setting
        typ = _field_type(hints[f.name], f.name, root)
        extra = {"description": notes[f.name]} if f.name in notes else {}
        if f.default is not dataclasses.MISSING:
            default = list(f.default) if isinstance(f.default, tuple) else f.default
            fields[f.name] = (typ, Field(default=default, **extra))
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
            if dataclasses.is_dataclass(default):
                fields[f.name] = (typ | None, Field(default=None, **extra))
            else:
                fields[f.name] = (typ, Field(default_factory=type(default), **extra))
        else:
            fields[f.name] = (typ, Field(**extra))
    if cls is root:
        fields["hosts"] = (dict[_BrokerId, _NonEmpty], Field(min_length=1, description=
                           "broker id -> the Airflow SSH connection id of its host (at least one broker)"))
        for key in root.ARGV_FIELDS:
            fields[key] = (list[_Str], Field(default=list(getattr(cls, key, ())) or [],
                                             description=notes.get(key, "argv run over SSH on the broker's host")))
    doc = inspect.getdoc(cls) if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(") else None
    return create_model(cls.__name__ + "Model", __config__=ConfigDict(extra="forbid", title=cls.__name__, json_schema_extra=None),
                        __doc__=doc, **fields)


def cluster_model(root: type) -> type[BaseModel]:
    return section_model(root, root)


def _is_branch(part: Any) -> bool:
    """A union member's tag in an error's location (which alternative failed), not a key of the settings."""
    return isinstance(part, str) and (part.endswith("Model") or part.startswith("constrained-") or part in ("str", "int"))


def _one_per_union(errs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A union's failed alternatives as the one error that fits the input: a broker id that is no number, or the
    object's own problems when an object was given (not also "expected a string")."""
    out, groups = [], {}
    for e in errs:
        i = next((k for k, part in enumerate(e["loc"]) if _is_branch(part)), None)
        if i is None:
            out.append(e)
        else:
            groups.setdefault(e["loc"][:i], []).append((e["loc"][i], {**e, "loc": e["loc"][:i] + e["loc"][i + 1:]}))
    for prefix, members in groups.items():
        if "[key]" in prefix:
            out.append({"type": "broker_id", "loc": prefix[:-1], "input": prefix[-2], "msg": ""})
            continue
        given_object = any(isinstance(e["input"], Mapping) for tag, e in members if not tag.endswith("Model"))
        out.extend(e for tag, e in members if tag.endswith("Model") == given_object)
    return out


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(the cluster)"


def errors(root: type, name: str, raw: Any) -> list[str]:
    """Every problem of one cluster's settings (``root``: its dataclass), one sentence each (empty: the shapes and types
    are right)."""
    out = []
    if not isinstance(name, str) or not root.NAME_PATTERN.fullmatch(name):
        out.append(f"invalid cluster name {name!r}: letters, digits, '_', '.', '-' (at most 128)")
    if not isinstance(raw, Mapping):
        return out + [f"cluster {name!r}: expected an object of settings, got {type(raw).__name__}"]
    for key in sorted(set(raw) & set(root.RETIRED)):
        out.append(f"cluster {name!r}: {key} is retired: {root.RETIRED[key]}")
    data = {k: v for k, v in raw.items() if k not in root.RETIRED and k != "name"}
    # a plain string where an argv list belongs is the classic mistake: say so by name
    for key in root.ARGV_FIELDS:
        if isinstance(data.get(key), str):
            out.append(f"cluster {name!r}: {key} must be an argv list, not a shell string")
            data.pop(key)
    try:
        cluster_model(root).model_validate(data)
    except ValidationError as exc:
        for e in _one_per_union(exc.errors(include_url=False)):
            path = _path(e["loc"])
            what = _EXPECTED.get(e["type"]) or e["msg"][0].lower() + e["msg"][1:]
            if e["type"] in ("missing", "extra_forbidden"):
                out.append(f"cluster {name!r}: {path}: {what}")
            else:
                out.append(f"cluster {name!r}: {path}: {what}, got {e['input']!r}")
    return out


def json_schema(root: type) -> dict[str, Any]:
    """The JSON Schema of the Variable ``kafka_runbooks_clusters``: an object of clusters (``root``) by name."""
    cluster = cluster_model(root).model_json_schema(ref_template="#/$defs/{model}")
    defs = cluster.pop("$defs", {})
    defs["ClusterConfig"] = cluster
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kafka-runbooks clusters (Airflow Variable kafka_runbooks_clusters)",
        "description": "Every cluster's settings, keyed by cluster name. Generated by `kafka-runbooks schema` from "
                       "kafka_runbooks/config.py; range checks (> 0, cron expressions, windows) are applied on top.",
        "type": "object",
        "propertyNames": {"pattern": root.NAME_PATTERN.pattern},
        "additionalProperties": {"$ref": "#/$defs/ClusterConfig"},
        "$defs": defs,
    }
