"""A run's compiled programs kept on disk under what they were traced from, so that a run
started again loads them without tracing, lowering or compiling.

JAX's compilation cache keys a program by its lowered HLO: before it can look a program up, a
process must trace the model and lower it, most of a warm start's second on two CPU cores
(`benchmarks/results/startup.md`). `cached_program` keeps a `Program`'s executables instead
under what determines their trace, and checks all of it again on every load:

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
import dataclasses
import functools
import hashlib
import json
import os
import pickle
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental import serialize_executable
from jax.experimental.compilation_cache import compilation_cache as jax_cache

from gelujax import host

FOLDER = "gelujax-executables"
# The duration event of each wait for an entry to be read and loaded (most are read in the
# background before they are needed); benchmarks/startup.py reports their sum.
WAIT_SECONDS = "/gelujax/executables/wait_duration_secs"
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


def cached_program(jitted: Mapping[str, Any], description: str | None) -> dict[str, Any]:
  """A program's jitted functions (by name) with their executables kept on disk under
  ``description`` (the program's, the same from process to process); the functions themselves
  where nothing can be kept. The entries kept for this program start loading at once, in
  background threads: they are ready, or nearly, when the functions are first called."""
  if description is None or _ADDRESS.search(description):
    return dict(jitted)
  program = _program_key(description)
  prefetch = _Prefetch(program)
  return {name: _Cached(fn, name, program, prefetch) for name, fn in jitted.items()}


class _Cached(jax.stages.Wrapped):
  """A jitted function whose executables, one per call signature, come from an entry on disk
  when a valid one holds them. Keyword arguments are its static ones; positional arguments are
  arrays. Traced (inside another transformation), exported or lowered, it is the jitted
  function itself."""

  def __init__(self, jitted: Any, name: str, program: str, prefetch: _Prefetch):
    self._jitted = jitted
    self._name = name
    self._program = program
    self._prefetch = prefetch
    self._compiled: dict[tuple, Callable[..., Any]] = {}

  def trace(self, *args: Any, **static: Any) -> Any:
    return self._jitted.trace(*args, **static)

  def lower(self, *args: Any, **static: Any) -> Any:
    return self._jitted.lower(*args, **static)

  def __call__(self, *args: Any, **static: Any) -> Any:
    leaves, tree = jax.tree.flatten(args)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
      return self._jitted(*args, **static)
    signature = _signature(leaves, tree, static)
    compiled = self._compiled.get(signature)
    if compiled is None:
      compiled = self._compiled[signature] = self._load_or_compile(args, static, signature)
    return compiled(*args)

  def _load_or_compile(self, args: tuple, static: dict, signature: tuple) -> Callable[..., Any]:
    where = folder()
    if where is None:
      return self._jitted.lower(*args, **static).compile()
    key = hashlib.sha256(repr((self._program, self._name, signature)).encode()).hexdigest()
    path = where / f"{self._name}-{self._program[:16]}-{key[:24]}.exe"
    compiled = _load(path, key, self._prefetch.take(path))
    if compiled is not None:
      return compiled
    with _without_jax_cache():
      compiled = self._jitted.lower(*args, **static).compile()
    _store(path, key, self._name, compiled)
    return compiled


class _Prefetch:
  """The entries of one program found on disk, each read and loaded in a background thread."""

  def __init__(self, program: str):
    where = folder()
    paths = sorted(where.glob(f"*-{program[:16]}-*.exe")) if where and where.is_dir() else []
    self._reads = {path: _pool().submit(_read, path) for path in paths}

  def take(self, path: Path) -> Future | None:
    """The read of ``path`` begun in the background, if one was (once)."""
    return self._reads.pop(path, None)


@functools.cache
def _pool() -> ThreadPoolExecutor:
  return ThreadPoolExecutor(max_workers=2, thread_name_prefix="gelujax-executables")


def _signature(leaves: list, tree: Any, static: dict) -> tuple:
  """What a call's executable depends on besides the program: the arguments' tree, and each
  array's shape, dtype, weak type and sharding; the static values."""
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


def _program_key(description: str) -> str:
  """The SHA-256 of what a program's entries depend on besides the call: the program's
  description, the machine and the settings."""
  devices = [(d.id, d.platform, d.device_kind, d.process_index) for d in jax.devices()]
  text = "\n".join(
    repr(part)
    for part in (
      description,
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


@dataclasses.dataclass(frozen=True)
class _Read:
  """An entry read from disk: its key and executable; no executable when there is no file or
  code changed since it was compiled, or the file is another program's (its key says) or
  damaged (``damage`` says how)."""

  key: str | None = None
  compiled: Any = None
  damage: str | None = None


def _read(path: Path) -> _Read:
  """Reads and loads the entry at ``path``, checking all but its key against the call's (which
  `_load` checks): that it is whole, and that no file of its code changed."""
  try:
    blob = path.read_bytes()
  except OSError:
    return _Read()
  try:
    if not blob.startswith(_MAGIC):
      raise ValueError("does not start as an entry does")
    end = blob.find(b"\n", len(_MAGIC))
    if end < 0:
      raise ValueError("is cut short (it ends in its header)")
    header = json.loads(blob[len(_MAGIC) : end])
    payload = blob[end + 1 :]
    key = header["key"]
    if not path.name.endswith(f"-{key[:24]}.exe"):
      return _Read(key=key)  # Another program's: `_load` says so, without loading it.
    if len(payload) != header["size"] or hashlib.sha256(payload).hexdigest() != header["sha256"]:
      raise ValueError("is cut short or damaged (its SHA-256 differs from the one it names)")
    files = header["files"]
  except (json.JSONDecodeError, KeyError, TypeError):
    return _Read(damage="has an unreadable header")
  except ValueError as e:
    return _Read(damage=str(e))
  if not _unchanged(files):
    return _Read(key=key)
  try:
    serialized, in_tree, out_tree = pickle.loads(payload)
    compiled = serialize_executable.deserialize_and_load(serialized, in_tree, out_tree)
  except Exception as e:  # Whatever the deserializer raises: the entry is not usable.
    return _Read(damage=f"does not load ({type(e).__name__}: {e})")
  return _Read(key=key, compiled=compiled)


def _load(path: Path, key: str, prefetched: Future | None) -> Any | None:
  """The executable of the valid entry of ``key`` at ``path`` (read in the background when
  ``prefetched``); None when there is none or it is stale, or it is damaged or another
  program's (then said on stderr)."""
  start = time.perf_counter()
  read = prefetched.result() if prefetched is not None else _read(path)
  jax.monitoring.record_event_duration_secs(WAIT_SECONDS, time.perf_counter() - start)
  if read.damage is None and read.key is not None and read.key != key:
    read = _Read(damage="holds another program")
  if read.damage is not None:
    print(
      f"gelujax: the compiled program {path} {read.damage}; it is compiled anew and the file "
      "replaced.",
      file=sys.stderr,
      flush=True,
    )
    return None
  if read.compiled is None:
    return None  # Missing, or stale: a miss, replaced by the caller.
  jax.monitoring.record_event(host.EXECUTABLE_LOAD_EVENT)  # for `host.cache_failure`
  return read.compiled


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
  temporary = None
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as f:
      temporary = f.name
      f.write(_MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n")
      f.write(payload)
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
