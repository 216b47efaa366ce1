"""A small registry of named components, looked up by names that may carry arguments.

A name is either a bare identifier (``"gelu"``) or a call with keyword literals
(``"gaussian_gelu(mu=0.5, sigma=2.0)"``); the literals are parsed with
:func:`ast.literal_eval`, so nothing is ever executed. Entries are registered with
``@registry.register("name")``. An *alias* is another project's name for an entry, written with
that project's prefix and arguments (``"torch:gelu(approximate='tanh')"``) and standing for a
spec of this registry (``"gelu_tanh"``); the prefix keeps aliases from ever shadowing a name.
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
    # (namespace, name, sorted keyword items) -> (alias as registered, target spec)
    self._aliases: dict[tuple, tuple[str, str]] = {}

  def register(self, name: str, entry: T | None = None):
    """Registers ``entry`` under ``name``; without ``entry``, returns a decorator."""
    if entry is None:
      return functools.partial(self.register, name)
    if name in self._entries:
      raise ValueError(f"{self.kind} {name!r} is already registered.")
    self._entries[name] = entry
    return entry

  def alias(self, alias: str, target: str) -> None:
    """Registers ``alias`` (``"namespace:name"`` or ``"namespace:name(k=v, ...)"``) for ``target``.

    Lookups of the alias match its namespace, name and keyword values, however they are
    spelled (quotes, spaces, keyword order).

    Raises:
      ValueError: if ``alias`` has no namespace or is taken, or ``target`` does not resolve.
    """
    key = _alias_key(alias)
    if key is None:
      raise ValueError(
        f"{self.kind} alias {alias!r} needs a namespace, as in 'torch:gelu': aliases never "
        "shadow the registry's own names."
      )
    if key in self._aliases:
      raise ValueError(f"{self.kind} alias {alias!r} is already registered.")
    self.get(target)  # Fails now, naming the target, rather than at lookup.
    self._aliases[key] = (alias, target)

  def aliases(self) -> dict[str, str]:
    """Every alias, as registered, mapped to its target spec (in registration order)."""
    return dict(self._aliases.values())

  def resolve(self, spec: str) -> str:
    """The spec ``spec`` stands for: an alias's target, or ``spec`` itself if it is no alias.

    Raises:
      ValueError: for a namespaced spec that is no known alias (listing that namespace's).
    """
    key = _alias_key(spec)
    if key is None:
      return spec
    try:
      return self._aliases[key][1]
    except (KeyError, TypeError):  # TypeError: unhashable keyword values (lists).
      pass
    known = [a for k, (a, _) in self._aliases.items() if k[0] == key[0]]
    if not known:
      namespaces = sorted({k[0] for k in self._aliases})
      raise ValueError(
        f"Unknown {self.kind} {spec!r}: no aliases in namespace {key[0]!r}; known namespaces: "
        f"{', '.join(namespaces) or 'none'}."
      )
    raise ValueError(f"Unknown {self.kind} {spec!r}; known {key[0]} names: {', '.join(known)}.")

  def names(self) -> list[str]:
    """The registered names, sorted (aliases are in :meth:`aliases`)."""
    return sorted(self._entries)

  def __contains__(self, spec: str) -> bool:
    try:
      return parse_name(self.resolve(spec))[0] in self._entries
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
    """Resolves ``"name"``, ``"name(k=v)"`` or an alias (see :meth:`alias`).

    A bare name returns the registered entry itself. A name with arguments returns
    ``functools.partial(entry, **kwargs)`` after checking that the entry accepts them.
    """
    name, kwargs = parse_name(self.resolve(spec))
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


def _alias_key(spec: str) -> tuple | None:
  """``(namespace, name, sorted keyword items)`` of ``"namespace:name(k=v)"``; None if ``spec``
  does not start with an identifier and a colon (a colon inside arguments is no namespace).

  Raises:
    ValueError: if the rest after the namespace does not parse.
  """
  namespace, sep, rest = spec.partition(":")
  if not sep or not namespace.strip().isidentifier():
    return None
  try:
    name, kwargs = parse_name(rest)
  except ValueError:
    raise ValueError(
      f"Cannot parse {spec!r}: expected a name after the namespace, such as 'torch:gelu' or "
      "\"torch:gelu(approximate='tanh')\"."
    ) from None
  return namespace.strip(), name, tuple(sorted(kwargs.items()))
