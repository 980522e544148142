"""Frozen records that are still dataclasses, without dataclasses' start-up cost.

`@dataclass(frozen=True)` generates `__init__`, `__eq__`, `__hash__`, `__repr__` and
`__setattr__` as source code and `exec`s it for every class when the module is imported: about a
millisecond a class, a third of `advisor check --json`'s cold start. A `@record` class is a real
dataclass (`dataclasses.fields`, `replace`, `asdict` and pydantic all work on it) whose methods are
generic ones inherited from `Record`, so nothing is generated or executed per class.
"""

from __future__ import annotations

from dataclasses import MISSING, FrozenInstanceError, dataclass
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a faster start)
if TYPE_CHECKING:
    from typing import Any


class Record:
    """Base class of `@record` classes: value semantics, immutable after `__init__`."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names, defaults, factories = _spec(type(self))
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional arguments")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key in values:
                raise TypeError(f"{type(self).__name__}() got multiple values for {key!r}")
            if key not in defaults and key not in names:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {key!r}")
            values[key] = value
        for name in names:
            if name not in values:
                default = defaults.get(name, MISSING)
                if default is MISSING:
                    raise TypeError(f"{type(self).__name__}() missing required argument {name!r}")
                values[name] = default() if name in factories else default
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in _spec(type(self))[0])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        # a dict field (a runtime's option names, say) hashes by its items
        return hash((type(self).__name__, tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v
                                                for v in self._values())))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in _spec(type(self))[0])
        return f"{type(self).__name__}({fields})"


_SPECS: dict[type, tuple[tuple[str, ...], dict[str, Any], frozenset[str]]] = {}


def _spec(cls: type) -> tuple[tuple[str, ...], dict[str, Any], frozenset[str]]:
    """Field names, defaults, and the names whose default is a factory to call, read once per class."""
    spec = _SPECS.get(cls)
    if spec is None:
        names, defaults, factories = [], {}, set()
        for f in cls.__dataclass_fields__.values():  # type: ignore[attr-defined]
            names.append(f.name)
            if f.default is not MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is not MISSING:
                defaults[f.name] = f.default_factory
                factories.add(f.name)
        spec = _SPECS[cls] = (tuple(names), defaults, frozenset(factories))
    return spec


def record(cls: type) -> type:
    """Make a `Record` subclass a dataclass without generating any code for it."""
    if not issubclass(cls, Record):
        raise TypeError(f"{cls.__name__} must subclass Record")
    return dataclass(init=False, repr=False, eq=False)(cls)
