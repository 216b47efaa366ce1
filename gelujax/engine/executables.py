"""A run's compiled programs kept on disk under what they were traced from, so that a run
started again loads them without tracing, lowering or compiling.

JAX's compilation cache keys a program by its lowered HLO: before it can look a program up, a
process must trace the model and lower it, most of a warm start's second on two CPU cores
(`benchmarks/results/startup.md`). `cached` keeps a `Program`'s executables instead under what
determines their trace, and checks all of it again on every load:

- **the program**: its caller's description (`gelujax.engine.fit.make_program`: the task's
  values, the mesh's devices, the grid's size, the training data's shapes), the function's name,
  and each call's argument shapes, dtypes, shardings and static values;
- **the machine and settings**: the devices, Python, every JAX setting, ``XLA_FLAGS`` and
  ``sys.path`` (where a user's activation module is found: `gelujax.specs` puts the current
  folder on it);
- **the code**: every Python module loaded when the program was compiled, by its file's path,
  size and modification time, which Python checks of its own bytecode cache. A file changed or
  gone makes the entry stale: the program is compiled anew and the entry replaced.

An entry names its key and the SHA-256 of its executable, and is written whole (a temporary file
renamed into place): a file cut short, damaged or swapped for another program's is found before
it is loaded, and is compiled anew and replaced, with one line on stderr. An entry that cannot be
written (a full or read-only disk) costs only the next run's compile.

Entries hold executables compiled afresh, never one that JAX's own cache served: on the CPU
client of jaxlib 0.10 such an executable serializes without some of its kernels, and fails when
it runs ("NOT_FOUND: Function ... not found"). So the programs kept here bypass JAX's cache:
a program met for the first time with this code and these settings (after an edit, or with
another number of epochs) compiles afresh where JAX's cache might have held it, once.

The folder is ``gelujax-executables`` in JAX's compilation cache folder
(`gelujax.host.enable_compilation_cache`); there is none when that cache is off, in a
multi-process run, or in a process whose ``__main__`` has no file (a notebook, ``python -c``),
whose code could change without changing any file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental import serialize_executable
from jax.experimental.compilation_cache import compilation_cache as jax_cache

from gelujax import host

FOLDER = "gelujax-executables"
# The duration event of each load (benchmarks/startup.py reports their sum).
LOAD_SECONDS = "/gelujax/executables/load_duration_secs"
_MAGIC = b"gelujax executable 1\n"
# A repr holding an object's address changes from process to process: no entry could match.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# The folders this process could not write an entry to.
_unwritable: list[Path] = []


def folder() -> Path | None:
  """Where entries are kept in this process, or None (see the module's docstring)."""
  path = jax.config.jax_compilation_cache_dir
  if not jax.config.jax_enable_compilation_cache or not path or "://" in str(path):
    return None
  if jax.process_count() > 1 or not getattr(sys.modules.get("__main__"), "__file__", None):
    return None
  return Path(path) / FOLDER


def cached(jitted: Any, name: str, description: str | None) -> Any:
  """``jitted`` with its executables kept on disk under ``description`` (the program's, stable
  from process to process); ``jitted`` itself where nothing can be kept."""
  if description is None or _ADDRESS.search(description):
    return jitted
  return _Cached(jitted, name, description)


class _Cached(jax.stages.Wrapped):
  """A jitted function whose executables, one per call signature, come from an entry on disk
  when a valid one holds them. Keyword arguments are its static ones; positional arguments are
  arrays. Traced (inside another transformation), exported or lowered, it is the jitted
  function itself."""

  def __init__(self, jitted: Any, name: str, description: str):
    self._jitted = jitted
    self._name = name
    self._description = description
    self._compiled: dict[tuple, Callable[..., Any]] = {}

  def trace(self, *args: Any, **static: Any) -> Any:
    return self._jitted.trace(*args, **static)

  def lower(self, *args: Any, **static: Any) -> Any:
    return self._jitted.lower(*args, **static)

  def __call__(self, *args: Any, **static: Any) -> Any:
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args)):
      return self._jitted(*args, **static)
    signature = _signature(args, static)
    compiled = self._compiled.get(signature)
    if compiled is None:
      compiled = self._compiled[signature] = self._load_or_compile(args, static, signature)
    return compiled(*args)

  def _load_or_compile(self, args: tuple, static: dict, signature: tuple) -> Callable[..., Any]:
    where = folder()
    if where is None:
      return self._jitted.lower(*args, **static).compile()
    key = _key(self._name, self._description, signature)
    path = where / f"{self._name}-{key[:40]}.exe"
    compiled = _load(path, key)
    if compiled is not None:
      return compiled
    with _without_jax_cache():
      compiled = self._jitted.lower(*args, **static).compile()
    _store(path, key, self._name, compiled)
    return compiled


def _signature(args: tuple, static: dict) -> tuple:
  """What a call's executable depends on besides the program: the arguments' tree, and each
  array's shape, dtype, weak type and sharding; the static values."""
  leaves, tree = jax.tree.flatten(args)
  avals = tuple(
    (
      type(x).__name__,
      np.shape(x),
      str(np.result_type(x)),
      getattr(x, "weak_type", False),
      getattr(x, "sharding", None),
    )
    for x in leaves
  )
  return (tree, avals, tuple(sorted(static.items())))


def _key(name: str, description: str, signature: tuple) -> str:
  """The entry's SHA-256 key: the program, the call, the machine and the settings."""
  devices = [(d.id, d.platform, d.device_kind, d.process_index) for d in jax.devices()]
  text = "\n".join(
    repr(part)
    for part in (
      name,
      description,
      signature,
      devices,
      sys.version,
      platform.machine(),
      sorted((k, repr(v)) for k, v in jax.config.values.items()),
      os.environ.get("XLA_FLAGS", ""),
      sys.path,
    )
  )
  return hashlib.sha256(text.encode()).hexdigest()


def _code_files() -> list[tuple[str, int, int]]:
  """(path, size, modification time in ns) of every loaded module's file."""
  files = set()
  for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None)
    if isinstance(path, str):
      files.add(path)
  out = []
  for path in sorted(files):
    with contextlib.suppress(OSError):
      stat = os.stat(path)
      out.append((path, stat.st_size, stat.st_mtime_ns))
  return out


def _unchanged(files: list) -> bool:
  for path, size, mtime in files:
    try:
      stat = os.stat(path)
    except OSError:
      return False
    if stat.st_size != size or stat.st_mtime_ns != mtime:
      return False
  return True


@contextlib.contextmanager
def _without_jax_cache() -> Iterator[None]:
  """JAX's compilation cache off for one compile (see the module's docstring)."""
  jax_cache.reset_cache()
  jax.config.update("jax_enable_compilation_cache", False)
  try:
    yield
  finally:
    jax.config.update("jax_enable_compilation_cache", True)
    jax_cache.reset_cache()


def _damaged(path: Path, why: str) -> None:
  print(
    f"gelujax: the compiled program {path} {why}; it is compiled anew and the file replaced.",
    file=sys.stderr,
    flush=True,
  )


def _load(path: Path, key: str) -> Any | None:
  """The executable of a valid entry at ``path``; None when there is none, it is stale or it
  is damaged (then said on stderr)."""
  start = time.perf_counter()
  try:
    blob = path.read_bytes()
  except OSError:
    return None
  try:
    if not blob.startswith(_MAGIC):
      raise ValueError("does not start as an entry does")
    end = blob.find(b"\n", len(_MAGIC))
    if end < 0:
      raise ValueError("is cut short (it ends in its header)")
    header = json.loads(blob[len(_MAGIC) : end])
    payload = blob[end + 1 :]
    if header["key"] != key:
      raise ValueError("holds another program")
    if len(payload) != header["size"] or hashlib.sha256(payload).hexdigest() != header["sha256"]:
      raise ValueError("is cut short or damaged (its SHA-256 differs from the one it names)")
  except (json.JSONDecodeError, KeyError, TypeError):
    _damaged(path, "has an unreadable header")
    return None
  except ValueError as e:
    _damaged(path, str(e))
    return None
  if not _unchanged(header["files"]):
    return None  # Code changed since it was compiled: a miss, replaced below.
  try:
    serialized, in_tree, out_tree = pickle.loads(payload)
    compiled = serialize_executable.deserialize_and_load(serialized, in_tree, out_tree)
  except Exception as e:  # Whatever the deserializer raises: the entry is not usable.
    _damaged(path, f"does not load ({type(e).__name__}: {e})")
    return None
  jax.monitoring.record_event(host.EXECUTABLE_LOAD_EVENT)  # for `host.cache_failure`
  jax.monitoring.record_event_duration_secs(LOAD_SECONDS, time.perf_counter() - start)
  return compiled


def _store(path: Path, key: str, name: str, compiled: Any) -> None:
  """Writes the entry whole; a failure to write costs only the next run's compile."""
  try:
    payload = pickle.dumps(serialize_executable.serialize(compiled))
  except (ValueError, NotImplementedError, pickle.PicklingError, TypeError):
    return  # This backend or program cannot be serialized: it is compiled every run.
  header = {
    "key": key,
    "name": name,
    "size": len(payload),
    "sha256": hashlib.sha256(payload).hexdigest(),
    "files": _code_files(),
  }
  buffer = io.BytesIO()
  buffer.write(_MAGIC)
  buffer.write(json.dumps(header, separators=(",", ":")).encode())
  buffer.write(b"\n")
  buffer.write(payload)
  temporary = None
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as f:
      temporary = f.name
      f.write(buffer.getvalue())
      os.fchmod(f.fileno(), 0o644)  # as JAX writes its own entries
    os.replace(temporary, path)
  except OSError as e:
    if temporary:
      with contextlib.suppress(OSError):
        os.unlink(temporary)
    if not _unwritable:  # Said once: the next program meets the same disk.
      print(
        f"gelujax: could not keep compiled programs in {path.parent} ({type(e).__name__}: "
        f"{e.strerror or e}); the next run compiles them again.",
        file=sys.stderr,
        flush=True,
      )
    _unwritable.append(path.parent)
