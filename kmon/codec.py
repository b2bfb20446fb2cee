"""The events' codec: how an :mod:`kmon.events` dataclass becomes bytes on the wire, and how a
value read back is checked field by field against the schema, so that one bad message is a
counted MalformedEvent, never a crash.

An event on the wire is compact JSON written by orjson (:func:`encode`): the dataclasses' fields in
their declared order, so an event's bytes depend on its state alone. The stream's records and its
record log are written the same way (:func:`to_json`).
"""
from __future__ import annotations

import collections.abc
import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import fields
from typing import Annotated, Any, Callable, Literal

import orjson

from kmon.events import INT64_MAX, STATE_TYPES, SUPPORTED_VERSIONS, Event, MalformedEvent, Range

def encode(event: Event) -> bytes:
    """The event as JSON (:func:`to_json`'s form), in bytes of its own length: the bytes orjson returns
    keep about 4 KB each whatever their length, which whoever holds many (the publisher's buffer
    through an events-cluster outage) would pay."""
    return memoryview(orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS)).tobytes()


def decode(value: bytes | str) -> Event:
    """Parse and validate one event value; raises MalformedEvent naming the problem, and
    nothing else, whatever the value: one bad message must not stop the stream."""
    doc = parse_json(value)
    if type(doc) is not dict:
        raise MalformedEvent(f"expected a JSON object, got {type(doc).__name__}")
    v = doc.get("v")
    if type(v) is not int or v not in SUPPORTED_VERSIONS:
        raise MalformedEvent(f"unsupported schema version v={_short(v)}")
    kind = doc.get("kind")
    if type(kind) is not str or kind not in STATE_TYPES:
        raise MalformedEvent(f"unknown kind {_short(kind)}")
    doc["data"] = None if doc.get("op") == "delete" else from_plain(STATE_TYPES[kind], doc.get("data"))
    if not doc.keys() <= _ENVELOPE:   # envelope fields this version does not know are ignored: a newer collector may add some
        doc = {k: doc[k] for k in _ENVELOPE if k in doc}
    return from_plain(Event, doc)


def parse_json(value: bytes | str) -> Any:
    """Parse JSON, raising MalformedEvent only. orjson, for speed (bench/NOTES.md); it also refuses
    what no field takes (NaN, Infinity, a lone surrogate, bad UTF-8, an int beyond 64 bits, nesting
    deeper than 1024)."""
    try:
        return orjson.loads(value)
    except (ValueError, RecursionError) as e:
        raise MalformedEvent(f"not JSON: {_short(e)}") from None


def to_json(value: Any) -> str:
    """Compact JSON text of ``value``: parsed JSON, or a dataclass of this schema (orjson writes
    dataclasses itself, in field order, without plain dicts built first); int map keys as text, as
    JSON must. How the stream stores what :func:`parse_json`
    reads, and what an event is on the wire (:func:`encode`)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def from_plain(cls: type, raw: Any, trusted: bool = False) -> Any:
    """Inverse of :func:`plain`: the dataclass ``cls`` from parsed JSON, every field checked
    against its type hint (ints are ints, not bools or strings, and within their Range;
    lists, maps and nested dataclasses down to their items). Raises MalformedEvent.

    ``trusted``: ``raw`` is what this kmon's :func:`to_json` wrote of a valid instance (the
    stream's executors hand the driver the records they folded and checked): its values are
    converted (lists to tuples, map keys to ints) but not checked again, which is faster."""
    try:
        return _fast(cls, not trusted)(raw)
    except Exception:   # anything the fast path does not vouch for: the checked path decides, and names it
        return _checked(cls, raw)


def _checked(cls: type, raw: Any) -> Any:
    if type(raw) is not dict:
        raise MalformedEvent(f"{cls.__name__} should be a JSON object, got {_short(raw)}")
    converters = _converters(cls)
    if not raw.keys() <= converters.keys():
        raise MalformedEvent(f"{cls.__name__}: unknown fields {sorted(raw.keys() - converters.keys())}")
    args = {}
    name = ""
    try:
        for name, value in raw.items():
            args[name] = converters[name](value)
    except MalformedEvent as e:
        raise MalformedEvent(f"{cls.__name__}.{name}: {e}") from None
    try:
        return cls(**args)
    except TypeError as e:  # missing required fields
        raise MalformedEvent(f"{cls.__name__}: {e}") from None


Convert = Callable[[Any], Any]   # a JSON value -> the field's value, or MalformedEvent


class _Slow(Exception):
    """The fast path met a value it does not vouch for."""


@functools.cache
def _fast(cls: type, checked: bool = True) -> Convert:
    """A decoder of ``cls`` written out from its type hints, for valid input: the checked path
    calls a converter per field, which costs most of a decode (bench/NOTES.md). It accepts only
    what the checked path accepts (ASCII strings, ints in range, ...) and raises otherwise;
    unless not ``checked``: then it only converts (see from_plain's ``trusted``).
    It fills the instance's ``__dict__`` itself: a frozen dataclass' ``__init__`` sets each field
    through ``object.__setattr__``, a large share of an event's decode (the schema has no __post_init__)."""
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__}: the fast decoder fills __dict__, which skips __post_init__ and has no slots")
    env: dict[str, Any] = {"Slow": _Slow, "cls": cls, "new": object.__new__,
                           "names": frozenset(f.name for f in fields(cls))}
    lines = ["def fast(raw):", *(["    if type(raw) is not dict or not raw.keys() <= names: raise Slow"] if checked else []),
             "    obj = new(cls)", "    args = obj.__dict__"]
    defaults = {f.name: f for f in fields(cls)}
    for i, (name, hint) in enumerate(typing.get_type_hints(cls, include_extras=True).items()):
        lines += [f"    if {name!r} in raw:", f"        v = raw[{name!r}]"]
        lines += ["        " + line for line in _fast_check(hint, f"c{i}", env, checked)]
        lines.append(f"        args[{name!r}] = v")
        default = defaults[name]
        if default.default is not dataclasses.MISSING:
            env[f"d{i}"] = default.default
            lines.append(f"    else: args[{name!r}] = d{i}")
        elif default.default_factory is not dataclasses.MISSING:
            env[f"d{i}"] = default.default_factory
            lines.append(f"    else: args[{name!r}] = d{i}()")
        else:   # a required field missing: the checked path names it
            lines.append("    else: raise Slow")
    lines.append("    return obj")
    exec("\n".join(lines), env)   # noqa: S102 (code made from type hints, not from input)
    return env["fast"]


def _fast_check(hint: Any, tag: str, env: dict[str, Any], checked: bool = True) -> list[str]:
    """Statements that check ``v`` against ``hint`` (raise) and leave its value in ``v``; only
    the conversions unless ``checked``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    check = (lambda *lines: list(lines)) if checked else (lambda *lines: [])
    if origin in (typing.Union, types.UnionType):
        (inner,) = (a for a in args if a is not type(None))
        return ["if v is not None:", *("    " + line for line in _fast_check(inner, tag, env, checked) or ["pass"])]
    if (valid := _fast_scalar(hint, "v")) is not None:
        return check(f"if not ({valid}): raise Slow")
    if hint is bool:
        return check("if type(v) is not bool: raise Slow")
    if hint is Any:
        return []
    if origin is Literal and all(type(a) is str for a in args):
        env[tag] = frozenset(args)
        return check(f"if type(v) is not str or v not in {tag}: raise Slow")
    if origin is collections.abc.Mapping and args[0] is str:
        keys = check(f"if type(v) is not dict or not all({_fast_scalar(str, 'x')} for x in v): raise Slow")
        if (valid := _fast_scalar(args[1], "x")) is not None:   # the dict parse_json made is kept as it is
            return keys + check(f"if not all({valid} for x in v.values()): raise Slow")
        env[tag] = _fast_value(args[1], checked)
        return keys + [f"v = {{x: {tag}(y) for x, y in v.items()}}"]
    if origin is collections.abc.Mapping and (key := _fast_scalar(args[0], "x")) is not None:
        # int keys, which JSON writes as text: plain digits without a leading zero here (the checked
        # path decides the rest, such as negative keys)
        if (valid := _fast_scalar(args[1], "y")) is not None:
            value = check(f"    if not ({valid}): raise Slow")
        else:
            env[tag] = _fast_value(args[1], checked)
            value = [f"    y = {tag}(y)"]
        return [*check("if type(v) is not dict: raise Slow"), "out = {}", "for x, y in v.items():",
                *check("    if not (x.isascii() and x.isdigit() and (x[0] != '0' or len(x) == 1)): raise Slow"),
                "    x = int(x)", *check(f"    if not ({key}): raise Slow"),
                *value, "    out[x] = y", "v = out"]
    item = typing.get_args(args[0]) if origin is tuple else ()
    if item and item[0] is int and typing.get_origin(args[0]) is Annotated:
        lo, hi = item[1].lo, item[1].hi
        return [*check("if type(v) is not list or not all(type(x) is int for x in v) "
                       f"or (v and not ({lo} <= min(v) and max(v) <= {hi})): raise Slow"), "v = tuple(v)"]
    env[tag] = _fast(hint, checked) if dataclasses.is_dataclass(hint) else _converter(hint)
    return [f"v = {tag}(v)"]


@functools.cache
def _fast_value(hint: Any, checked: bool = True) -> Convert:
    """_fast_check's statements for ``hint`` as a function of one value (a map's values)."""
    env: dict[str, Any] = {"Slow": _Slow}
    lines = ["def fast(v):", *("    " + line for line in _fast_check(hint, "c", env, checked)), "    return v"]
    exec("\n".join(lines), env)   # noqa: S102 (code made from type hints, not from input)
    return env["fast"]


def _fast_scalar(hint: Any, var: str) -> str | None:
    """An expression true when ``var`` holds a valid value of ``hint``; None if it is no int or str."""
    if hint is str:
        return f"type({var}) is str and {var}.isascii()"
    if hint is int:
        return f"type({var}) is int and {-INT64_MAX - 1} <= {var} <= {INT64_MAX}"
    if typing.get_origin(hint) is Annotated and typing.get_args(hint)[0] is int:
        bounds = typing.get_args(hint)[1]
        return f"type({var}) is int and {bounds.lo} <= {var} <= {bounds.hi}"
    return None


_ENVELOPE = frozenset(f.name for f in fields(Event))
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]{0,18})")   # an int map key as JSON writes it


@functools.cache
def _converters(cls: type) -> dict[str, Convert]:
    return {name: _converter(hint)
            for name, hint in typing.get_type_hints(cls, include_extras=True).items()}


@functools.cache
def _converter(hint: Any) -> Convert:
    """The converter of one type hint, built once: decode runs per event on the hot path."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return functools.partial(_bounded, _converter(args[0]), args[1])
    if origin in (typing.Union, types.UnionType):   # the schema's unions are all "X | None"
        (inner,) = (a for a in args if a is not type(None))
        return functools.partial(_optional, _converter(inner))
    if origin is Literal:
        return functools.partial(_one_of, args)
    if origin is tuple:                              # tuple[X, ...]
        return functools.partial(_tuple, _converter(args[0]))
    if origin is collections.abc.Mapping:
        base = typing.get_args(args[0])[0] if typing.get_origin(args[0]) is Annotated else args[0]
        key = _converter(args[0])
        # JSON writes int keys as text
        return functools.partial(_mapping, functools.partial(_int_key, key) if base is int else key,
                                 _converter(args[1]))
    if dataclasses.is_dataclass(hint):
        return functools.partial(from_plain, hint)
    return _SCALAR_CONVERTERS[hint]


def _int(value: Any) -> int:
    if type(value) is not int:   # not a bool, a float, a string of digits
        raise MalformedEvent(f"should be an integer, got {_short(value)}")
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise MalformedEvent(f"out of the int64 range: {_short(value)}")
    return value


def _float(value: Any) -> float:
    if type(value) is int:
        return _int(value)
    if type(value) is not float or not math.isfinite(value):   # a document parsed by json.loads, not parse_json, may hold NaN
        raise MalformedEvent(f"should be a finite number, got {_short(value)}")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise MalformedEvent(f"should be a string, got {_short(value)}")
    if value.isascii():   # O(1): CPython keeps the flag
        return value
    try:
        value.encode()
    except UnicodeEncodeError:   # a lone surrogate: JSON's \ud800 escape, which the exposition cannot write
        raise MalformedEvent(f"is not valid Unicode: {_short(value)}") from None
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:   # not 0/1, not "true"
        raise MalformedEvent(f"should be true or false, got {_short(value)}")
    return value


_SCALAR_CONVERTERS: dict[Any, Convert] = {int: _int, float: _float, str: _str, bool: _bool, Any: lambda value: value}


def _bounded(convert: Convert, bounds: Range, value: Any) -> Any:
    value = convert(value)
    if not bounds.lo <= value <= bounds.hi:
        raise MalformedEvent(f"out of range [{bounds.lo}, {bounds.hi}]: {value}")
    return value


def _optional(convert: Convert, value: Any) -> Any:
    return None if value is None else convert(value)


def _one_of(choices: tuple[Any, ...], value: Any) -> Any:
    if type(value) not in {type(c) for c in choices} or value not in choices:
        raise MalformedEvent(f"should be one of {list(choices)}, got {_short(value)}")
    return value


def _tuple(item: Convert, value: Any) -> tuple[Any, ...]:
    if type(value) is not list:
        raise MalformedEvent(f"should be a list, got {_short(value)}")
    return tuple(map(item, value))


def _mapping(key: Convert, item: Convert, value: Any) -> dict[Any, Any]:
    if type(value) is not dict:
        raise MalformedEvent(f"should be a JSON object, got {_short(value)}")
    return {key(k): item(v) for k, v in value.items()}


def _int_key(convert: Convert, text: str) -> int:
    if not _DECIMAL.fullmatch(text):
        raise MalformedEvent(f"key should be a decimal integer, got {_short(text)}")
    return convert(int(text))


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, BaseException) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."   # a hostile value must not flood the log

