"""The schema's frozen dataclasses built on hot paths, without their ``__init__``.

A frozen dataclass' ``__init__`` sets each field through ``object.__setattr__``, which made
building a PartitionState, its Event and its LogMeta a large share of a metadata record's cost in
the KRaft collector (bench/README.md, the KRaft collector). :func:`constructor` writes, once per
class, a function taking the same arguments (and defaults) that fills the instance's ``__dict__``
directly: the instance is the same (equal, hashable, encoded alike). Its ``__dict__`` is then a
real dict, as orjson makes it anyway when it encodes the instance.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_FACTORY = object()   # the default of a field whose default is made by a factory


@functools.cache
def constructor(cls: type[T]) -> Callable[..., T]:
    """A function building ``cls`` as ``cls(...)`` does, faster; refuses a class whose ``__init__``
    does more than set its fields (``__post_init__``, fields outside ``__init__``) or that has slots."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or not all(f.init for f in fields):
        raise TypeError(f"{cls.__name__}: its __init__ does more than set its fields")
    # the function's own names begin with "__", which no field's name does (a class body mangles them)
    env: dict[str, Any] = {"__new": object.__new__, "__cls": cls, "__FACTORY": _FACTORY}
    params = [_parameter(f, env) for f in fields]
    body = ["    __obj = __new(__cls)", "    __fields = __obj.__dict__"]
    body += [f"    if {f.name} is __FACTORY: {f.name} = __factory_{f.name}()" for f in fields
             if f.default_factory is not dataclasses.MISSING]
    body += [f"    __fields[{f.name!r}] = {f.name}" for f in fields]
    source = "\n".join([f"def build({', '.join(params)}):", *body, "    return __obj"])
    exec(source, env)   # noqa: S102 (code made from the class' fields, not from input)
    build: Callable[..., T] = env["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build


def _parameter(f: dataclasses.Field, env: dict[str, Any]) -> str:
    """The field as __init__ takes it: ``name``, or ``name=`` its default (__FACTORY: made in the body)."""
    if f.default is not dataclasses.MISSING:
        env[f"__default_{f.name}"] = f.default
        return f"{f.name}=__default_{f.name}"
    if f.default_factory is not dataclasses.MISSING:
        env[f"__factory_{f.name}"] = f.default_factory
        return f"{f.name}=__FACTORY"
    return f.name


def replace(obj: T, **changes: Any) -> T:
    """``dataclasses.replace`` through :func:`constructor`."""
    return constructor(type(obj))(**{**obj.__dict__, **changes})
