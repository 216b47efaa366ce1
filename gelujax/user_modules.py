"""A user's own module: ``"module.path:name"`` specs parsed, the module imported from the
Python path, and what a run records of it: the sha256 of its source as imported, and the user's
modules it imports (not the standard library's or the installed packages'), so that a run
resumed after any of them changed is refused. Used by a user's activation
(`gelujax.specs.user_activation`), model (`gelujax.models.user`) and study
(`gelujax.study.registry.resolve`)."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import os
import re
import site
import sys
import sysconfig
from typing import Any

from gelujax.registry import parse_name

_USER_SPEC = re.compile(r"\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*:(.*)", re.DOTALL)

# A user's module -> the sha256 of its source read as it was imported (:func:`import_user_module`):
# what trained, not what the file holds when the run's record is written.
_IMPORTED_SHA256: dict[str, str | None] = {}
# A user's module -> the modules that first came into `sys.modules` while it was imported and
# its function called, or its class built (:func:`note_user_module`).
_IMPORTED_WITH: dict[str, set[str]] = {}


def parse_user_spec(spec: Any) -> tuple[str, str, dict[str, Any]] | None:
  """``(module, name, keyword arguments)`` when ``spec`` has the form of a name of the user's
  own, ``"module.path:name"`` or ``"module.path:name(k=v)"``; else None. Only literals are
  parsed (`gelujax.registry.parse_name`): nothing is imported.

  Raises:
    gelujax.registry.ParseError: what follows the ``:`` is no name with keyword literals.
  """
  match = _USER_SPEC.fullmatch(spec) if isinstance(spec, str) else None
  if match is None:
    return None
  name, kwargs = parse_name(match.group(2))
  return match.group(1), name, kwargs


_RUNNERS = "train.py and reproduce.py add the folder they run in"


def import_user_module(module_name: str, what: str, runners: str = _RUNNERS) -> Any:
  """The user's module ``module_name`` imported from the Python path and recorded
  (:func:`note_user_module`: the sha256 of its source as imported, the modules its import
  brought in); ``what`` (``"activation 'm:f'"``) and ``runners`` (who adds the folder they run
  in to the path) name it in the error. A caller that runs the module's code after (an
  activation's first calls) notes what those import too.

  Raises:
    ValueError: in one paragraph, the module does not import, with its import's own reason.
  """
  before = set(sys.modules)
  try:
    module = importlib.import_module(module_name)
  except Exception as e:  # The user's module: whatever its import raises is the reason.
    raise ValueError(
      f"{what}: module {module_name!r} does not import ({type(e).__name__}: {e}); it must be "
      f"importable from the Python path (PYTHONPATH; {runners})."
    ) from None
  note_user_module(module_name, before)
  return module


def note_user_module(module_name: str, before: set[str]) -> None:
  """Records the user's module ``module_name``, just imported (and, for a class, built): the
  sha256 of its source as it was imported, and the modules that came into ``sys.modules``
  since ``before`` (a set of their names taken before the import), which
  :func:`user_imports` adds to those its import statements name."""
  _IMPORTED_SHA256.setdefault(module_name, _sha256(sys.modules.get(module_name)))
  _IMPORTED_WITH.setdefault(module_name, set()).update(set(sys.modules) - before)


def source_record(module_name: str, name: str) -> dict[str, Any]:
  """``{"module", "function", "file", "sha256", "imports"}`` of ``name`` in the imported
  module ``module_name``, as a run's config.json records a user's activation or model: the
  sha256 of the source file's bytes as imported, and ``imports``, the ``{"module", "file",
  "sha256"}`` of each of the user's modules it imports (:func:`user_imports`)."""
  module = sys.modules.get(module_name)
  return {
    "module": module_name,
    "function": name,
    "file": getattr(module, "__file__", None),
    "sha256": _IMPORTED_SHA256.get(module_name) or _sha256(module),
    "imports": [module_record(m) for m in user_imports(module_name)],
  }


def module_record(name: str) -> dict[str, Any] | None:
  """``{"module", "file", "sha256"}`` of the imported module ``name`` when it is the user's
  (:func:`is_users_module`); None when it is not, or not imported."""
  module = sys.modules.get(name)
  if module is None or not is_users_module(name, module):
    return None
  return {"module": name, "file": module.__file__, "sha256": _sha256(module)}


def user_imports(module_name: str) -> list[str]:
  """The user's modules (:func:`is_users_module`) that the module ``module_name`` imports,
  directly or through one another, sorted: those its ``import`` statements name (its parent
  packages too), read from the source of each, found however it was imported; and those that
  first came into ``sys.modules`` while it was imported and its function called
  (:func:`note_user_module`: an import by ``importlib``). The module itself is left out."""
  root = sys.modules.get(module_name)
  if root is None:
    return []
  found = {n for n in _IMPORTED_WITH.get(module_name, ()) if n in sys.modules}
  found.update(_parents(module_name))
  found = {n for n in found if is_users_module(n, sys.modules.get(n))}
  stack = [root, *(sys.modules[n] for n in found)]
  while stack:
    for name in _imported_names(stack.pop()):
      module = sys.modules.get(name)
      if name not in found and is_users_module(name, module):
        found.add(name)
        stack.append(module)
  found.discard(module_name)
  return sorted(found)


def _parents(name: str) -> list[str]:
  """``"a.b.c"`` -> ``["a", "a.b"]``: the packages an import of ``name`` imports first."""
  parts = name.split(".")
  return [".".join(parts[:i]) for i in range(1, len(parts))]


def _imported_names(module: Any) -> set[str]:
  """The modules ``module``'s import statements name, anywhere in its source (in a function
  too), with their parent packages and, for ``from a import b``, ``a.b`` (``b`` may be a
  module); relative imports resolved. Empty when its source cannot be read or parsed."""
  get_data = getattr(getattr(module, "__loader__", None), "get_data", None)
  file = getattr(module, "__file__", None)
  try:
    tree = ast.parse(importlib.util.decode_source(get_data(file)))
  except Exception:  # no source (a compiled module), or none Python can parse: none named
    return set()
  package = (getattr(module, "__package__", None) or "").split(".")
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        if node.level - 1 >= len(package) or not package[0]:
          continue  # beyond the top package: it would not import
        base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
      names.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
  return {n for name in names if name for n in (*_parents(name), name)}


def is_users_module(name: str, module: Any) -> bool:
  """Whether ``module`` (imported as ``name``) is the user's own: it has a file, outside the
  standard library and the environment's installed packages (site-packages, of
  ``sys.prefix`` and ``sys.base_prefix``), and is not gelujax's."""
  file = getattr(module, "__file__", None)
  if not isinstance(file, str) or name == "gelujax" or name.startswith("gelujax."):
    return False
  path = os.path.realpath(file)
  return not any(path.startswith(folder + os.sep) for folder in _installed_folders())


@functools.cache
def _installed_folders() -> tuple[str, ...]:
  """The standard library's and the installed packages' folders, of this environment and of
  the Python it was made from."""
  folders = set(getattr(site, "getsitepackages", list)()) | {site.getusersitepackages()}
  for base in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
    paths = sysconfig.get_paths(vars={"base": base, "platbase": base, "installed_base": base,
                                      "installed_platbase": base})  # fmt: skip
    folders.update(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib"))
  return tuple(sorted({os.path.realpath(f) for f in folders if f}))


def _sha256(module: Any) -> str | None:
  """The sha256 of ``module``'s source file as its loader reads it (a module imported from a
  zip archive has no file to open at its ``__file__``); None when there is none to read."""
  file = getattr(module, "__file__", None)
  if not file:
    return None
  get_data = getattr(getattr(module, "__loader__", None), "get_data", None)
  try:
    if get_data is not None:
      data = get_data(file)
    else:
      with open(file, "rb") as f:
        data = f.read()
  except OSError:  # gone since it was imported: nothing to hash
    return None
  return hashlib.sha256(data).hexdigest()
