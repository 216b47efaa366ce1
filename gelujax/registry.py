"""A small registry of named components, looked up by names that may carry arguments.

A name is either a bare identifier (``"gelu"``) or a call with keyword literals
(``"gaussian_gelu(mu=0.5, sigma=2.0)"``); the literals are parsed with
:func:`ast.literal_eval`, so nothing is ever executed.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def parse_name(spec: str) -> tuple[str, dict[str, Any]]:
  """Splits ``"name(k=v, ...)"`` into ``("name", {"k": v, ...})``.

  Raises:
    ValueError: if ``spec`` is not an identifier optionally followed by keyword
      arguments whose values are Python literals.
  """
  try:
    node = ast.parse(spec.strip(), mode="eval").body
  except SyntaxError:
    node = None
  if isinstance(node, ast.Name):
    return node.id, {}
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
    kwargs = {}
    for keyword in node.keywords:
      if keyword.arg is None:
        break
      try:
        kwargs[keyword.arg] = ast.literal_eval(keyword.value)
      except ValueError:
        break
    else:
      return node.func.id, kwargs
  raise ValueError(
    f"Cannot parse {spec!r}: expected a name such as 'gelu' or a name with keyword "
    "literals such as 'gaussian_gelu(mu=0.5, sigma=2.0)'."
  )


class Registry(Generic[T]):
  """Maps names to components (functions, classes, specs) of one kind."""

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: dict[str, T] = {}

  def register(self, name: str, entry: T | None = None):
    """Registers ``entry`` under ``name``; without ``entry``, returns a decorator."""
    if entry is None:
      return functools.partial(self.register, name)
    if name in self._entries:
      raise ValueError(f"{self.kind} {name!r} is already registered.")
    self._entries[name] = entry
    return entry

  def names(self) -> list[str]:
    """The registered names, sorted."""
    return sorted(self._entries)

  def __contains__(self, spec: str) -> bool:
    try:
      return parse_name(spec)[0] in self._entries
    except ValueError:
      return False

  def __iter__(self) -> Iterator[str]:
    return iter(self.names())

  def lookup(self, name: str) -> T:
    """The entry registered under a bare ``name``; unknown names list the known ones."""
    if name not in self._entries:
      raise ValueError(
        f"Unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self.names())}."
      )
    return self._entries[name]

  def get(self, spec: str) -> T | Callable[..., Any]:
    """Resolves ``"name"`` or ``"name(k=v)"``.

    A bare name returns the registered entry itself. A name with arguments returns
    ``functools.partial(entry, **kwargs)`` after checking that the entry accepts them.
    """
    name, kwargs = parse_name(spec)
    entry = self.lookup(name)
    if not kwargs:
      return entry
    try:
      inspect.signature(entry).bind_partial(**kwargs)
    except TypeError as e:
      raise ValueError(f"Bad arguments in {self.kind} {spec!r}: {e}.") from None
    except ValueError:  # Builtins without a signature: let the call decide.
      pass
    return functools.partial(entry, **kwargs)
