"""A small registry of named components, looked up by names that may carry arguments.

A name is either a bare identifier (``"gelu"``) or a call with keyword literals
(``"gaussian_gelu(mu=0.5, sigma=2.0)"``); the literals are parsed with
:func:`ast.literal_eval`, so nothing is ever executed. Entries are registered with
``@registry.register("name")``. An *alias* is another project's name for an entry, written with
that project's prefix and arguments (``"torch:gelu(approximate='tanh')"``) and standing for a
spec of this registry (``"gelu_tanh"``); the prefix keeps aliases from ever shadowing a name.
An unknown name is answered with what was likely meant (:meth:`Registry.hint`): the namespaced
spellings of a bare name that only an alias has (``"gelu_new"`` is ``"transformers:gelu_new"``),
or, for a typo, the closest known names.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class ParseError(ValueError):
  """A spec that is no name with keyword literals; ``reason`` says why, in a clause."""

  def __init__(self, spec: str, reason: str):
    super().__init__(f"Cannot parse {spec!r}: {reason}.")
    self.spec, self.reason = spec, reason


def parse_name(spec: str) -> tuple[str, dict[str, Any]]:
  """Splits ``"name(k=v, ...)"`` into ``("name", {"k": v, ...})``.

  The one parser of specs, and a spec is parsed once a process: the result is kept (a copy is
  returned, so that no caller changes another's values).

  Raises:
    ParseError: if ``spec`` is not an identifier optionally followed by keyword arguments whose
      values are Python literals, each keyword given once (as a call takes them).
  """
  name, kwargs = _parse_name(spec)
  return name, copy.deepcopy(kwargs)


@functools.lru_cache(maxsize=4096)
def _parse_name(spec: str) -> tuple[str, dict[str, Any]]:
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
      if keyword.arg in kwargs:  # ast parses it; a call would refuse it, and so does this.
        raise ParseError(spec, f"keyword {keyword.arg!r} is given twice; give each once")
      try:
        kwargs[keyword.arg] = ast.literal_eval(keyword.value)
      except ValueError:
        break
    else:
      return node.func.id, kwargs
  raise ParseError(
    spec,
    "expected a name such as 'gelu' or a name with keyword literals such as "
    "'gaussian_gelu(mu=0.5, sigma=2.0)'",
  )


def close_names(name: str, known: Iterable[str]) -> list[str]:
  """The names of ``known`` that ``name`` is most likely a typo of, best first (at most three).

  A name qualifies when :class:`difflib.SequenceMatcher`'s similarity ratio is at least 0.75 and
  within 0.05 of the best one's, so a clear nearest name is not followed by distant ones.
  """
  scored = [(difflib.SequenceMatcher(None, name, k).ratio(), k) for k in dict.fromkeys(known)]
  scored = sorted((s for s in scored if s[0] >= 0.75), key=lambda s: -s[0])
  return [k for ratio, k in scored[:3] if ratio >= scored[0][0] - 0.05]


def did_you_mean(names: list[str]) -> str:
  """``"Did you mean a, b or c?"``, or ``""`` for no names."""
  if not names:
    return ""
  listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
  return f"Did you mean {listed}?"


def sentences(*parts: str) -> str:
  """The non-empty ``parts`` joined by spaces: a message whose optional sentences may be ``""``."""
  return " ".join(part for part in parts if part)


class Registry(Generic[T]):
  """Maps names to components (functions, classes, specs) of one kind."""

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: dict[str, T] = {}
    # name -> what is wrong with a spec's arguments (`register`'s ``check``)
    self._checks: dict[str, Callable[[dict[str, Any]], str | None]] = {}
    # (namespace, name, sorted keyword items) -> (alias as registered, target spec)
    self._aliases: dict[tuple, tuple[str, str]] = {}

  def register(
    self,
    name: str,
    entry: T | None = None,
    *,
    check: Callable[[dict[str, Any]], str | None] | None = None,
  ):
    """Registers ``entry`` under ``name``; without ``entry``, returns a decorator.

    ``check``, if given, takes the arguments of a spec (``{"sigma": 0}``, with the entry's
    defaults for those not given) and says what is wrong with their values in a clause
    (``"sigma must be > 0, not 0"``), or returns None: :meth:`get` then refuses such a spec
    before the entry is ever called.
    """
    if entry is None:
      return functools.partial(self.register, name, check=check)
    if name in self._entries:
      raise ValueError(f"{self.kind} {name!r} is already registered.")
    self._entries[name] = entry
    if check is not None:
      self._checks[name] = check
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

  def namespaces(self) -> set[str]:
    """The namespaces of the aliases (``"torch"`` of ``"torch:gelu"``)."""
    return {key[0] for key in self._aliases}

  def resolve(self, spec: str) -> str:
    """The spec ``spec`` stands for: an alias's target, or ``spec`` itself if it is no alias.

    Raises:
      ValueError: for a namespaced spec that is no known alias (listing that namespace's).
    """
    key = _alias_key(spec)
    if key is None:
      return spec
    target = self._alias_target(key)
    if target is not None:
      return target
    known = [a for k, (a, _) in self._aliases.items() if k[0] == key[0]]
    if not known:
      namespaces = sorted({k[0] for k in self._aliases})
      problem = (
        f"Unknown {self.kind} {spec!r}: no aliases in namespace {key[0]!r}; known namespaces: "
        f"{', '.join(namespaces) or 'none'}."
      )
    else:
      problem = f"Unknown {self.kind} {spec!r}; known {key[0]} names: {', '.join(known)}."
    raise ValueError(sentences(problem, self.hint(spec)))

  def hint(self, spec: str) -> str:
    """What ``spec`` likely meant, or why it fails, in a sentence; ``""`` if it resolves.

    - a bare name that is no entry but the name of aliases: their namespaced spellings and what
      each computes (``'gelu_new' is another library's name, written here with its namespace:
      transformers:gelu_new (computes gelujax's gelu_tanh).``);
    - an entry's name written with a namespace that has no such alias: drop the namespace;
    - any other unknown name or alias: the closest known ones (:func:`close_names`), aliases by
      their namespaced spellings, or ``""`` when none is close;
    - a spec that does not parse, or whose arguments its entry does not take: the reason.
    """
    try:
      key = _alias_key(spec)
      name = key[1] if key else parse_name(spec)[0]
      if key is None and name in self._entries:
        self.get(spec)  # Checks the arguments.
    except ValueError as e:
      return str(e)
    if (key is None and name in self._entries) or (key and self._alias_target(key) is not None):
      return ""
    alias_names = {k[1] for k in self._aliases}
    if key is not None:  # A namespaced spec: the nearest aliases, else the nearest namespace.
      if name in self._entries and name not in alias_names:
        return f"{name!r} is gelujax's own {self.kind}; write it without a namespace."
      spellings = [a for k, (a, _) in self._aliases.items() if k[0] == key[0]]
      if spellings:
        return did_you_mean(close_names(spec.strip(), spellings))
      namespaces = close_names(key[0], (k[0] for k in self._aliases))
      return did_you_mean([f"{n}:{spec.partition(':')[2].strip()}" for n in namespaces])
    spelled: dict[str, list[tuple[str, str]]] = {}  # bare name -> (alias, target) of each alias
    for k, (alias, target) in self._aliases.items():
      spelled.setdefault(k[1], []).append((alias, target))
    if name in spelled:
      listed = ", ".join(f"{a} (computes gelujax's {t})" for a, t in spelled[name])
      return f"{name!r} is another library's name, written here with its namespace: {listed}."
    nearest = close_names(name, [*self._entries, *spelled])
    return did_you_mean(
      [s for n in nearest for s in ([n] if n in self._entries else [a for a, _ in spelled[n]])]
    )

  def _alias_target(self, key: tuple) -> str | None:
    """The target spec of the alias with this key, or None."""
    try:
      return self._aliases[key][1]
    except (KeyError, TypeError):  # TypeError: unhashable keyword values (lists).
      return None

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
    """The entry registered under a bare ``name``; an unknown name gets :meth:`hint` and the
    known names."""
    if name not in self._entries:
      known = f"Known {self.kind}s: {', '.join(self.names())}."
      raise ValueError(sentences(f"Unknown {self.kind} {name!r}.", self.hint(name), known))
    return self._entries[name]

  def get(self, spec: str) -> T | Callable[..., Any]:
    """Resolves ``"name"``, ``"name(k=v)"`` or an alias (see :meth:`alias`).

    A bare name returns the registered entry itself. A name with arguments returns
    ``functools.partial(entry, **kwargs)`` after checking that the entry accepts them, and
    their values (`register`'s ``check``).
    """
    name, kwargs = parse_name(self.resolve(spec))
    entry = self.lookup(name)
    if not kwargs:
      return entry
    try:
      bound = inspect.signature(entry).bind_partial(**kwargs)
    except TypeError as e:
      raise ValueError(f"Bad arguments in {self.kind} {spec!r}: {e}.") from None
    except ValueError:  # Builtins without a signature: let the call decide.
      bound = None
    if bound is not None and name in self._checks:
      bound.apply_defaults()
      problem = self._checks[name](dict(bound.arguments))
      if problem:
        raise ValueError(f"Bad arguments in {self.kind} {spec!r}: {problem}.")
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
