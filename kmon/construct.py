"""The schema's frozen dataclasses built on hot paths without their ``__init__``.

A frozen dataclass' ``__init__`` sets each field through ``object.__setattr__``, and
``dataclasses.replace`` reads the class' fields again at every call: the two were a fifth of a
metadata record's cost in the KRaft collector (bench/NOTES.md). :func:`constructor` writes, once per
class, a function taking the same arguments and defaults that fills the instance's ``__dict__``
itself, as the codec's fast decoder does: the instance is the same (equal, hashable, encoded alike).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, TypeVar

T = TypeVar("T")
_MADE = object()   # the default of a field whose default a factory makes


@functools.cache
def constructor(cls: type[T]) -> Callable[..., T]:
    """A function building ``cls`` as ``cls(...)`` does, faster. Refuses a class whose ``__init__`` does
    more than set its fields (``__post_init__``, a field outside ``__init__``) or that has slots (no
    ``__dict__`` to fill)."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or not all(f.init for f in fields):
        raise TypeError(f"{cls.__name__}: its __init__ does more than set its fields")
    # the function's own names begin with "__", which no field's name can (a class body mangles them)
    env: dict[str, Any] = {"__new": object.__new__, "__cls": cls, "__MADE": _MADE}
    params, body = [], ["    __obj = __new(__cls)", "    __fields = __obj.__dict__"]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            env[f"__default_{f.name}"] = f.default
            params.append(f"{f.name}=__default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:   # made at each call, as __init__ makes it
            env[f"__factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__MADE")
            body.append(f"    if {f.name} is __MADE: {f.name} = __factory_{f.name}()")
        else:
            params.append(f.name)
    body += [f"    __fields[{f.name!r}] = {f.name}" for f in fields]
    exec("\n".join([f"def build({', '.join(params)}):", *body, "    return __obj"]), env)  # noqa: S102 (from the fields)
    build: Callable[..., T] = env["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build


def replace(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for a class :func:`constructor` accepts, without reading
    the class' fields again: the changes must name fields (unchecked here; the tests check the callers)."""
    constructor(type(obj))   # refuses what it refuses (cached: one lookup)
    new = object.__new__(type(obj))
    fields = new.__dict__
    fields.update(obj.__dict__)
    fields.update(changes)
    return new
