"""gelujax's imports, read from the source with `ast` (every import statement, those inside
functions too; nothing is imported): no cycle among its modules, and no module taking another
module's private name.

The rules:

- An import is an edge to the module it names: ``import gelujax.a.b`` and ``from gelujax.a
  import b`` (``b`` a module) to ``gelujax.a.b``; ``from gelujax.a import name`` (``name`` not a
  module) to ``gelujax.a``, a package's ``__init__``. The packages above a module, which Python
  runs before it, are not edges: else every package whose ``__init__`` imports its submodules
  would be a cycle with each of them. So a package's ``__init__`` may import its submodules and
  they each other, but a submodule that takes names from the ``__init__`` that imports it is in a
  cycle: what the submodules share lives in a submodule they import. A cycle is reported with
  the import that makes each of its steps.
- A private name (``_name``, not a dunder) is its module's own: no other module imports it
  (``from gelujax.m import _name``) or reads it from an imported module (``m._name``). A private
  module (``gelujax/cli/_flags.py``, ``gelujax/_gelu_numerics.py``) is its package's own: the
  modules inside that package (its subpackages included) may import it and use its public names,
  none outside.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import textwrap
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gelujax"


@dataclasses.dataclass(frozen=True)
class Import:
  """``module`` imports ``target`` (``name`` from it, None where the module itself) at
  ``line``."""

  module: str
  target: str
  name: str | None
  line: int


def modules(root: Path, package: str) -> dict[str, Path]:
  """Dotted name -> file of every module under ``root/package`` (a package by its
  ``__init__``)."""
  found = {}
  for path in sorted((root / package).rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  return found


def private(name: str) -> bool:
  return name.startswith("_") and not name.startswith("__")


def imports_of(module: str, path: Path, known: dict[str, Path], package: str) -> list[Import]:
  """Every import of a module of ``package`` in ``path``'s source, and every attribute read
  from a module bound by one (``m.name``, as an import of ``name`` from ``m``)."""
  tree = ast.parse(path.read_text(), str(path))
  here = module if path.name == "__init__.py" else module.rpartition(".")[0]
  found, bound = [], {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name in known:
          found.append(Import(module, alias.name, None, node.lineno))
          if alias.asname:
            bound[alias.asname] = alias.name
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # Relative: from the package `here`, `level - 1` packages up.
        parts = here.split(".")[: len(here.split(".")) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
      if base != package and not base.startswith(f"{package}."):
        continue
      for alias in node.names:
        if f"{base}.{alias.name}" in known:
          found.append(Import(module, f"{base}.{alias.name}", None, node.lineno))
          bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        else:
          found.append(Import(module, base, alias.name, node.lineno))
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
      target = bound.get(node.value.id)
      if target and f"{target}.{node.attr}" not in known:
        found.append(Import(module, target, node.attr, node.lineno))
  return found


def all_imports(root: Path, package: str) -> list[Import]:
  known = modules(root, package)
  return [i for module, path in known.items() for i in imports_of(module, path, known, package)]


@functools.cache
def gelujax_imports() -> tuple[Import, ...]:
  return tuple(all_imports(ROOT, PACKAGE))


def cycles(found: Sequence[Import]) -> list[list[Import]]:
  """One cycle of imports per group of modules that import each other (Tarjan's strongly
  connected components), each from its first module in sorted order."""
  graph: dict[str, dict[str, Import]] = {}
  for i in sorted(found, key=lambda i: (i.module, i.line)):
    graph.setdefault(i.target, {})
    if i.target != i.module:
      graph.setdefault(i.module, {}).setdefault(i.target, i)
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  groups: list[set[str]] = []

  def visit(v: str) -> None:
    index[v] = low[v] = len(index)
    stack.append(v)
    for w in graph[v]:
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      group = set()
      while not group or v not in group:
        group.add(stack.pop())
      if len(group) > 1:
        groups.append(group)

  for v in sorted(graph):
    if v not in index:
      visit(v)
  found_cycles = []
  for group in sorted(groups, key=min):
    start = min(group)
    paths = {start: []}  # Breadth first within the group, back to start: a shortest cycle.
    queue = [start]
    while queue:
      v = queue.pop(0)
      for w, step in graph[v].items():
        if w == start:
          queue = []
          found_cycles.append([*paths[v], step])
          break
        if w in group and w not in paths:
          paths[w] = [*paths[v], step]
          queue.append(w)
  return found_cycles


def describe(cycle: list[Import]) -> str:
  steps = " -> ".join(f"{i.module} (line {i.line})" for i in cycle)
  return f"{steps} -> {cycle[0].module}"


def private_takings(found: Sequence[Import]) -> list[Import]:
  """The imports that break the private-name rule (the module docstring's)."""
  broken = []
  for i in found:
    if i.name is not None and private(i.name) and i.target != i.module:
      broken.append(i)
    owner, _, last = i.target.rpartition(".")
    if i.name is None and private(last) and not f"{i.module}.".startswith(f"{owner}."):
      broken.append(i)
  return broken


def write_package(root: Path, files: dict[str, str]) -> None:
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_a_cycle_is_found_through_a_function_and_an_init_but_not_through_a_parent(tmp_path):
  """The rules on a made-up package: a cycle closed by an import inside a function is found; an
  ``__init__`` importing its submodules, which import each other, is not a cycle; a submodule
  taking a name from the ``__init__`` that imports it is; the cycle names each step's line."""
  write_package(tmp_path, {
    "pkg/__init__.py": "from pkg import a, d\nNAME = 1\n",
    "pkg/a.py": "from pkg import b\n\n\ndef f():\n  from pkg.c import thing\n",
    "pkg/b.py": "import os\n",
    "pkg/c.py": "import pkg.a\nthing = 1\n",
    "pkg/d.py": "from pkg import NAME\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/e.py": "from ..b import x\nfrom . import f\n",
    "pkg/sub/f.py": "from pkg.sub.e import y\n",
  })  # fmt: skip
  found = all_imports(tmp_path, "pkg")
  assert [describe(c) for c in cycles(found)] == [
    "pkg (line 1) -> pkg.d (line 1) -> pkg",
    "pkg.a (line 5) -> pkg.c (line 1) -> pkg.a",
    "pkg.sub.e (line 2) -> pkg.sub.f (line 1) -> pkg.sub.e",
  ]
  assert Import("pkg.sub.e", "pkg.b", "x", 1) in found  # Relative, two levels up.


def test_a_private_name_taken_from_another_module_is_found(tmp_path):
  """The rules on a made-up package: a private name imported or read from an imported module is
  found, a dunder is not; a private module is imported freely within its package, not from
  outside it."""
  write_package(tmp_path, {
    "pkg/__init__.py": "",
    "pkg/a.py": "_own = 1\n\n\ndef f():\n  return _own\n",
    "pkg/b.py": "from pkg.a import _own, __doc__\n",
    "pkg/c.py": "from pkg import a as alias\nalias._own, alias.f, alias.__name__\n",
    "pkg/sub/__init__.py": "from pkg.sub import _helpers\n",
    "pkg/sub/_helpers.py": "",
    "pkg/sub/deeper/__init__.py": "from pkg.sub import _helpers\n",
    "pkg/d.py": "import pkg.sub._helpers\n",
  })  # fmt: skip
  assert private_takings(all_imports(tmp_path, "pkg")) == [
    Import("pkg.b", "pkg.a", "_own", 1),
    Import("pkg.c", "pkg.a", "_own", 2),
    Import("pkg.d", "pkg.sub._helpers", None, 1),
  ]


def test_the_reader_sees_gelujax_imports_at_the_top_and_inside_functions():
  """Edges the modules keep on purpose, so that the tests below cannot pass on a reader that
  sees nothing: the forms report reads the forms study; a reader of IDX files asks the host
  for memory inside a function."""
  edges = {(i.module, i.target) for i in gelujax_imports()}
  assert ("gelujax.study.forms_report", "gelujax.study.forms") in edges
  assert ("gelujax.data.mnist", "gelujax.host") in edges


def test_no_cycle_among_gelujax_modules():
  found = cycles(gelujax_imports())
  assert not found, "gelujax's modules import each other:\n" + "\n".join(map(describe, found))


def test_no_gelujax_module_takes_another_modules_private_name():
  broken = private_takings(gelujax_imports())
  assert not broken, "private names taken from another module:\n" + "\n".join(
    f"{i.module} line {i.line}: {i.target}{f'.{i.name}' if i.name else ''}" for i in broken
  )


def test_the_engine_knows_nothing_of_task_specs():
  """The engine takes built parts (`gelujax.parts.Parts`, which `gelujax.tasks.build` makes):
  no module of `gelujax.engine` imports `gelujax.tasks` (at its top or inside a function), and
  none names `TaskSpec` or annotates anything `Any` where a task would go."""
  engine = [i for i in gelujax_imports() if i.module.startswith("gelujax.engine")]
  assert engine and not [i for i in engine if i.target == "gelujax.tasks"]
  for path in (ROOT / "gelujax" / "engine").glob("*.py"):
    code = path.read_text()
    assert "TaskSpec" not in code and "task: Any" not in code, path


def _python(code: str) -> str:
  """What ``code`` prints in a fresh Python process of this checkout, on the CPU; its exit
  status must be 0."""
  import os
  import subprocess
  import sys

  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
  done = subprocess.run(
    [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, done.stderr[-2000:]
  return done.stdout


def test_every_module_imports_in_one_process_and_defines_no_flag():
  """Documentation tools and a user's script import every module: the two commands share flag
  names, so neither defines its flags on import (only when it runs)."""
  code = (
    "import pkgutil, importlib, gelujax\n"
    "from absl import flags\n"
    "for m in pkgutil.walk_packages(gelujax.__path__, 'gelujax.'):\n"
    "  importlib.import_module(m.name)\n"
    "print(sorted(n for n in ('task', 'workdir', 'activations') if n in flags.FLAGS))\n"
  )
  assert _python(code).strip() == "[]"


def test_a_linen_models_commands_never_import_flax_nnx():
  """flax.nnx (with IPython, which it imports) and matplotlib are each half a second of every
  command's start: importing gelujax and both commands, and building a Linen task's model and
  activation, leave them unimported; a user's NNX activation imports flax.nnx where it is named,
  and a figure matplotlib where it is drawn."""
  code = (
    "import sys, gelujax, gelujax.cli.train, gelujax.cli.reproduce, gelujax.tasks\n"
    "from gelujax import linen\n"
    "import jax, jax.numpy as jnp\n"
    "m = linen.Activation('gelu_tanh')\n"
    "m.init(jax.random.key(0), jnp.ones(3))\n"
    "gelujax.tasks.get('mnist')\n"
    "before = 'flax.nnx' in sys.modules, 'matplotlib' in sys.modules\n"
    "gelujax.nnx.Activation('gelu')\n"
    "from gelujax.study import plots\n"
    "plots._new_figure(1)\n"
    "print(*before, 'flax.nnx' in sys.modules, 'matplotlib' in sys.modules)\n"
  )
  assert _python(code).split() == ["False", "False", "True", "True"]
