"""How a run uses the machine: CPU devices and threads, processes, memory, signals, the
compilation cache.

Everything here configures JAX before it starts its backends, so the entry points call it first,
before any array exists:

- `configure_cpu` splits a CPU host into devices, the unit over which the trainer's mesh spreads
  a grid's members, and picks how many threads each device's kernels use. XLA:CPU runs each
  device's program on its own thread, so with one device per core the members of a grid train
  in parallel with no communication; one device can instead give all cores to each kernel, which
  is what a single member needs. `benchmarks/results/training.md` holds the measurements behind
  the automatic choice.
- `initialize_distributed` joins a multi-process (multi-host) run.
- `enable_compilation_cache` keeps compiled programs on disk (JAX's own cache), so that
  re-running or resuming a command does not compile again; `repairing_compilation_cache`
  replaces entries JAX cannot read; `cache_failure` names the cache when a run that loaded
  programs from it fails.
- `describe_machine` names the machine (platform, CPU, devices, versions) for the results and
  benchmark reports.
- `available_memory`, `check_member_count` and `check_memory` refuse a grid too big for the
  host (or device) memory before any work.
- `unwind_on_signals`, `interrupt` and `signals_deferred`: SIGINT and SIGTERM unwind the process
  as `Interrupted`, never in the middle of a checkpoint's save, and never lost.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

# The environment variable XLA reads its flags from, when its backends start.
_XLA_FLAGS = "XLA_FLAGS"
_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
# XLA:CPU hands its dots to YNNPACK by default (``individual_dot``), whose kernels run on a
# thread pool of their own; an empty list gives every dot to XLA's own (Eigen) kernels.
_YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type"
# The event JAX records each time it loads a compiled program from the cache; the count of
# them in this process.
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_cache_hits = 0
# Where compiled programs are kept unless the caller says otherwise: the folder JAX's
# own JAX_COMPILATION_CACHE_DIR names when it is set (so that one setting moves every cache, as
# the tests do with a temporary folder), else the user's cache folder.
DEFAULT_CACHE = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
  os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
  "gelujax",
  "jax",
)


def host_cores() -> int:
  """The cores this process may run on."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not Linux.
    return os.cpu_count() or 1


def choose_cpu_devices(num_members: int, cores: int) -> int:
  """The automatic CPU device count for a grid of ``num_members`` on ``cores`` cores.

  A grid gets one device per core (but no more devices than members): members then train in
  parallel, each device single-threaded, which measures faster than giving every core to each
  kernel of a vmapped grid. A single member keeps one device whose kernels use every core:
  splitting its batch over one device per core measured slower (the gradient all-reduce of every
  step costs more than the second core gives; see benchmarks/results/training.md).
  """
  return max(1, min(cores, num_members))


# The most CPU devices `configure_cpu` splits a host into, per core. More devices than cores only
# share the cores (a test fakes a few to lay out a mesh); each costs memory and threads of its own,
# and a count like 100000 exhausts the memory before JAX has started (19 GB, never finished).
MAX_CPU_DEVICES_PER_CORE = 64


def configure_cpu(cpu_devices: str | int, num_members: int) -> int:
  """Splits the CPU host into devices for a grid of ``num_members``; call before JAX starts.

  Args:
    cpu_devices: ``"auto"`` (`choose_cpu_devices`, unless ``XLA_FLAGS`` sets
      ``--xla_force_host_platform_device_count``, which is then kept) or a device count >= 1.
      With more than one device, each device's kernels run single-threaded
      (``--xla_cpu_multi_thread_eigen=false``). Every dot runs on XLA's own kernels rather than
      YNNPACK's (``--xla_cpu_experimental_ynn_fusion_type=``): one member trained 1.2x faster so,
      and a grid on one device per core as fast. A flag that ``XLA_FLAGS`` sets itself is kept.
      At most `MAX_CPU_DEVICES_PER_CORE` devices per core, whichever sets the count.
    num_members: the size of the grid to be trained.

  Returns:
    The CPU device count (per process).

  Raises:
    ValueError: a bad ``cpu_devices``, a count above the bound, or JAX has already started its
      backends.
  """
  text = str(cpu_devices).strip().lower()
  flags = os.environ.get(_XLA_FLAGS, "")
  forced = re.search(rf"{_DEVICE_COUNT_FLAG}=(\d+)", flags)
  most = MAX_CPU_DEVICES_PER_CORE * host_cores()
  if text == "auto" and forced:  # The user's own XLA flags win over the automatic choice.
    digits, given = forced.group(1), f"{_XLA_FLAGS}'s {_DEVICE_COUNT_FLAG}={forced.group(1)}"
  elif text == "auto":
    digits, given = str(choose_cpu_devices(num_members, host_cores())), ""
  elif text.isdecimal() and text.lstrip("0"):
    digits, given = text, f"`cpu_devices` {cpu_devices!r}"
  else:
    raise ValueError(
      f"`cpu_devices` {cpu_devices!r} is not valid: give 'auto' or a device count >= 1."
    )
  # More digits than the bound's is over it (and never an int of thousands of digits).
  count = int(digits) if len(digits.lstrip("0")) <= len(str(most)) else most + 1
  if count > most:  # Before JAX makes them: 100000 devices took 19 GB and never started.
    raise ValueError(
      f"{given} is more than {MAX_CPU_DEVICES_PER_CORE} CPU devices per core (this host has "
      f"{host_cores()} core{'s' * (host_cores() != 1)}: at most {most:,}); each device has "
      "its own memory and threads, and more devices than cores only slow a run down; give "
      f"'auto' or a count up to {most:,}."
    )
  if not (text == "auto" and forced):
    try:
      jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX has started: fine if it already has what was asked for.
      started = len(jax.devices("cpu"))
      if text == "auto" or started == count:
        return started
      raise ValueError(
        f"`cpu_devices` {count}: JAX has already started with {started} CPU devices, and the "
        "device count can only be set before the first array is made."
      ) from None
  if count > 1 and not re.search(rf"{_EIGEN_FLAG}\b", flags):
    flags = f"{flags} {_EIGEN_FLAG}=false"
  if not re.search(rf"{_YNN_FLAG}\b", flags):
    flags = f"{flags} {_YNN_FLAG}="
  os.environ[_XLA_FLAGS] = flags.strip()
  return count


def initialize_distributed(coordinator_address: str, num_processes: int, process_id: int) -> None:
  """Joins a multi-process run; call it first, before anything touches a device.

  Every process runs the same command with its own ``process_id``; process 0 serves as the
  coordinator at ``coordinator_address`` (host:port) and writes the workdir's files. CPU
  processes exchange collectives through gloo (GPUs and TPUs use their own transport).

  Raises:
    ValueError: an address that is not ``host:port`` with a port in 1..65535, fewer than 1
      process, or a ``process_id`` outside ``0..num_processes - 1``.
  """
  host, _, port = str(coordinator_address).rpartition(":")
  if not host or not port.isdecimal() or not 1 <= int(port) <= 65535:
    raise ValueError(
      f"`coordinator_address` {coordinator_address!r} is not host:port (process 0's host name "
      "or address, and a port from 1 to 65535, e.g. 10.0.0.1:1234)."
    )
  if not (isinstance(num_processes, int) and num_processes >= 1):
    raise ValueError(f"`num_processes` {num_processes!r} must be an integer >= 1.")
  if not (isinstance(process_id, int) and 0 <= process_id < num_processes):
    raise ValueError(
      f"`process_id` {process_id!r} must be one of 0..{num_processes - 1} (`num_processes` "
      f"{num_processes})."
    )
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
    coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id
  )


def enable_compilation_cache(path: str | None) -> str | None:
  """Keeps compiled programs under ``path`` (``None`` or ``"none"``: no cache).

  Every program of a run is kept, however fast it compiled: a re-run or a resume then starts
  training without compiling. The cache is JAX's own: it keys each entry by the lowered program,
  the devices and the XLA flags, so whatever reaches a trace (an activation's constants, an
  edited file, an environment variable) is in the key, and a changed one compiles anew.
  Wrap the work in `repairing_compilation_cache` to replace entries JAX cannot read.

  Returns:
    The cache folder, or None when disabled.

  Raises:
    ValueError: ``path``, or the nearest of its parents that exists, is not a folder (a file,
      ``/dev/null``): JAX would fail every write there without a word.
  """
  if path is None or str(path).strip().lower() in ("", "none"):
    jax.config.update("jax_enable_compilation_cache", False)
    return None
  given, path = path, os.path.abspath(os.path.expanduser(path))
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    what = "it is" if existing == path else f"{existing} is"
    raise ValueError(
      f"`compilation_cache` {given} cannot hold compiled programs: {what} not a folder; pass a "
      "folder (made if missing), or none to keep no programs."
    )
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  _listen_for_cache_hits()
  return path


# JAX's warning when an entry cannot be read (cut short by a kill, damaged on disk): it then
# compiles the program anew, but never writes it over the entry, so every later run would warn
# and compile it again. It names the program (or the entry's key).
_UNREADABLE_ENTRY = re.compile(r"Error reading persistent compilation cache entry for '([^'/]+)'")


@contextlib.contextmanager
def repairing_compilation_cache() -> Iterator[None]:
  """While the block runs, an entry of the compilation cache that JAX cannot read is removed as
  JAX warns, before it compiles the program anew (so the fresh compile is written in its
  place), and said in one line instead of JAX's warning. Other warnings show as before;
  ``warnings.showwarning`` is restored when the block ends. The scripts wrap their work in it."""
  show = warnings.showwarning

  def showwarning(message, category, filename, lineno, file=None, line=None):
    match = _UNREADABLE_ENTRY.match(str(message))
    folder = jax.config.jax_compilation_cache_dir
    if not match or not folder:
      show(message, category, filename, lineno, file, line)
      return
    name = match.group(1)
    entries = [*Path(folder).glob(f"{name}-*-cache"), *Path(folder).glob(f"{name}-cache")]
    for entry in entries:
      with contextlib.suppress(OSError):
        entry.unlink()
    reason = str(message).split(": ", 1)[-1].splitlines()[0][:120]
    print(
      f"gelujax: the compilation cache {folder} held an entry of {name} that cannot be read "
      f"({reason}); removed {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} of it, and "
      "the program compiled now is kept in its place.",
      file=sys.stderr,
      flush=True,
    )

  warnings.showwarning = showwarning
  try:
    yield
  finally:
    warnings.showwarning = show


def describe_machine() -> str:
  """Platform, CPU model and core count, accelerator devices, jax and Python versions: the
  machine every results README and benchmark report names."""
  cpu = platform.processor() or platform.machine()
  cpuinfo = Path("/proc/cpuinfo")
  if cpuinfo.exists():
    names = [
      line.split(":", 1)[1].strip()
      for line in cpuinfo.read_text().splitlines()
      if line.startswith("model name")
    ]
    cpu = names[0] if names else cpu
  kinds: dict[str, int] = {}
  for device in jax.devices():
    kind = f"{device.device_kind} ({device.platform})"
    kinds[kind] = kinds.get(kind, 0) + 1
  found = ", ".join(f"{n} x {kind}" for kind, n in kinds.items())
  return (
    f"{platform.platform()}; CPU: {cpu}, {os.cpu_count()} cores; devices: {found}; "
    f"jax {jax.__version__}, Python {platform.python_version()}"
  )


@functools.cache  # Once: JAX's event listeners cannot be removed.
def _listen_for_cache_hits() -> None:
  jax.monitoring.register_event_listener(_count_cache_hits)


def _count_cache_hits(event: str, **kwargs: object) -> None:
  del kwargs
  global _cache_hits
  if event == _CACHE_HIT_EVENT:
    _cache_hits += 1


def cache_failure(error: BaseException) -> str | None:
  """One line for an unforeseen ``error`` of a process that ran compiled programs loaded from
  the compilation cache, naming the way around it (``compilation_cache``=none: no cache); None
  when it loaded none.

  JAX keys each cache entry by the program, but does not check that a loaded entry is the
  program of its key: an entry damaged or swapped on disk fails when it runs (a ValueError
  about layouts, an AssertionError, a runtime error), with an error that names neither the
  cache nor a way around it. Only an error that came out of JAX can be the program's: one that
  gelujax or a script raised (a refused value), or a file's error, gives None.
  """
  if not _cache_hits or isinstance(error, OSError) or not _raised_in_jax(error):
    return None
  text = str(error).strip().splitlines()[0] if str(error).strip() else ""
  return (
    f"{type(error).__name__}{f': {text}' if text else ''}. This process ran "
    f"{_cache_hits} compiled program{'s' * (_cache_hits != 1)} loaded from the "
    f"compilation cache {jax.config.jax_compilation_cache_dir}, where a damaged or swapped "
    "entry fails this way: re-run the same command with `compilation_cache`=none (or another "
    "folder) to compile them afresh."
  )


def _raised_in_jax(error: BaseException) -> bool:
  """Whether ``error`` came out of JAX: it passed through a JAX API, which takes its internal
  frames out of the traceback and says so in a note (or in a cause, as JAX_TRACEBACK_FILTERING
  asks), or its innermost frame is in jax or jaxlib (filtering off). A refusal that gelujax or a
  script raised did not."""
  notes = getattr(error, "__notes__", None) or []
  if any("JAX has removed its internal frames" in note for note in notes):
    return True
  if type(error.__cause__).__name__ == "UnfilteredStackTrace":
    return True
  traceback = error.__traceback__
  if traceback is None:
    return False
  while traceback.tb_next is not None:
    traceback = traceback.tb_next
  module = traceback.tb_frame.f_globals.get("__name__", "")
  return module.split(".")[0] in ("jax", "jaxlib")


# ---------------------------------------------------------------------------------- memory

# Host memory each member needs outside the device state: its TensorBoard event file and its
# config, metrics and summary records (measured as 125 KiB for tensorboardX's SummaryWriter,
# which gelujax used before it wrote event files itself; a bound for them now).
HOST_BYTES_PER_MEMBER = 128 * 1024


def available_memory() -> int:
  """Bytes the host can still give this process: MemAvailable, or the cgroup's limit when it
  is lower."""
  available = sys.maxsize
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          available = int(line.split()[1]) * 1024
  except OSError:
    pass
  for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    try:
      with open(path) as f:
        limit = f.read().strip()
    except OSError:
      continue
    if limit.isdigit():
      available = min(available, int(limit))
  return available


def check_member_count(count: int, argument: str = "seeds") -> None:
  """Refuses a grid of ``count`` members that the host cannot even keep the records of
  (before the members are listed, so that a count like 99999999999999 fails at once);
  ``argument``, the count's name in the message: ``seeds`` or ``evaluation_seeds``."""
  needed = count * HOST_BYTES_PER_MEMBER
  available = available_memory()
  if needed > available:
    raise ValueError(
      f"`{argument}` {count} asks for {count:,} members per learning rate; each needs at least "
      f"{HOST_BYTES_PER_MEMBER // 1024} KiB of host memory (its TensorBoard writer and "
      f"records) before any training, {_gb(needed)} in all, but {_gb(available)} is "
      "available. Train fewer seeds per run."
    )


def check_memory(
  member_state: Any,
  member_params: Any,
  members_per_device: int,
  members: int,
  splits: Mapping[str, Any],
) -> None:
  """Refuses a grid whose training cannot fit in memory, before any work.

  The estimate, a lower bound: every member holds its state (parameters and optimizer state)
  twice during a step (before and after), plus its gradients and updates; each device holds
  the states of its members (the mesh's ``members`` axis divides them) and the data (which
  every device holds whole); each member also needs `HOST_BYTES_PER_MEMBER` of host memory.
  Devices of the CPU platform share the host's memory.

  Args:
    member_state: one member's state (a pytree of arrays or `jax.ShapeDtypeStruct`).
    member_params: its parameters.
    members_per_device: the members each device holds.
    members: the number of members.
    splits: the arrays every device holds (the data set's splits).
  """
  state_bytes, param_bytes = _nbytes(member_state), _nbytes(member_params)
  data_bytes = _data_bytes(splits)
  per_device = members_per_device * (2 * state_bytes + 2 * param_bytes) + data_bytes
  host = members * HOST_BYTES_PER_MEMBER
  devices = jax.local_devices()
  if devices[0].platform == "cpu":
    needed, available = per_device * len(devices) + host, available_memory()
    where = f"host memory ({len(devices)} CPU device{'s' * (len(devices) > 1)})"
  else:
    limits = [(d.memory_stats() or {}).get("bytes_limit") for d in devices]
    if None in limits:
      return  # The device does not say its memory; nothing to check against.
    needed, available = per_device, min(limits)
    where = f"memory of each {devices[0].device_kind}"
  if needed > available:
    raise ValueError(
      f"A grid of {members:,} members needs about {_gb(needed)} of {where} to train, but "
      f"{_gb(available)} is available: each member holds {_count(member_params)} parameters "
      f"and {_gb(state_bytes)} of state (twice during a step, plus gradients and updates), "
      f"and the data take {_gb(data_bytes)}. Train fewer members per run (fewer `seeds` or "
      "`learning_rates`, split over several `workdir`)."
    )


def _nbytes(tree: Any) -> int:
  return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def _data_bytes(data: Any) -> int:
  """Bytes of the arrays in nested mappings (`gelujax.data.Splits` is no registered pytree)."""
  if isinstance(data, Mapping):
    return sum(_data_bytes(v) for v in data.values())
  return int(getattr(data, "nbytes", 0))


def _count(tree: Any) -> str:
  return f"{sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree)):,}"


def _gb(n: int) -> str:
  return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:.2f} MB"


# --------------------------------------------------------------------------------- signals


class Interrupted(KeyboardInterrupt):
  """SIGINT or SIGTERM, raised where it is safe: never in the middle of a save."""

  def __init__(self, signum: int, during: str | None = None):
    self.signum = signum
    name = signal.Signals(signum).name
    text = f"interrupted by {name}"
    if during:
      text += f" during {during}, which was completed first"
    super().__init__(text)


# The signals `interrupt` received in this process, oldest first.
_RECEIVED: list[int] = []


def interrupt(signum: int, frame: Any = None) -> None:
  """A signal handler that raises `Interrupted` (install it for SIGTERM so that ``kill``
  unwinds like Ctrl-C: files are closed, the workdir's lock is released), and remembers it:
  raised while Python runs a finalizer (an object's ``__del__``, a progress bar's clean-up), the
  exception is reported as ignored and lost, and the run would go on; `raise_if_interrupted`
  raises it again at the next safe point."""
  del frame
  _RECEIVED.append(signum)
  raise Interrupted(signum)


@contextlib.contextmanager
def signals_remembered() -> Iterator[None]:
  """Where the process keeps Python's own SIGINT handler (a user's script or notebook calling
  `gelujax.engine.fit`), `interrupt` takes SIGINT for the block, so that a Ctrl-C a finalizer
  swallows (see `unwind_on_signals`) still stops it at the next segment, and the handler is
  given back after; a handler of the process's own (the commands' `interrupt`, a user's) is
  left as it is. Only the main thread receives signals; elsewhere this does nothing."""
  main = threading.current_thread() is threading.main_thread()
  if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
    yield
    return
  del _RECEIVED[:]  # an earlier block's Ctrl-C was raised there
  hook = sys.unraisablehook
  signal.signal(signal.SIGINT, interrupt)
  sys.unraisablehook = _quiet_when_interrupted(hook)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.unraisablehook = hook


def unwind_on_signals() -> None:
  """Installs `interrupt` for SIGTERM, and for SIGINT unless the process ignores it (a shell
  starts ``cmd &`` with SIGINT ignored, and such a run keeps ignoring it), so that both unwind the
  same way and neither is ever lost.

  Python's own SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread is, a
  finalizer included (JAX's garbage-collection callback, a ``__del__``), where the exception is
  printed as "Exception ignored in ..." and dropped: a Ctrl-C that lands there, a few
  milliseconds after the workdir's lock is taken, used to let the run go on to the end and exit
  0. `interrupt` remembers each signal, so the next safe point raises it again
  (`raise_if_interrupted`), and the dropped exception is not printed: the run stops with its one
  line. Call it from the main thread of a command, before its work."""
  signal.signal(signal.SIGTERM, interrupt)
  if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
    signal.signal(signal.SIGINT, interrupt)
  if not getattr(sys.unraisablehook, "quiet_when_interrupted", False):
    sys.unraisablehook = _quiet_when_interrupted(sys.unraisablehook)


def _quiet_when_interrupted(hook: Callable[[Any], None]) -> Callable[[Any], None]:
  """A `sys.unraisablehook` that drops an `Interrupted` a finalizer could not raise (it is
  remembered, and raised again at the next safe point), and hands anything else to ``hook``."""

  def quiet(unraisable: Any) -> None:
    if not isinstance(unraisable.exc_value, Interrupted):
      hook(unraisable)

  quiet.quiet_when_interrupted = True
  return quiet


def raise_if_interrupted() -> None:
  """Raises `Interrupted` for a signal `interrupt` received whose exception was lost (see
  there); nothing if none came. The training loop calls it after each segment, and the
  commands before they report success."""
  if _RECEIVED:
    raise Interrupted(_RECEIVED[0])


@contextlib.contextmanager
def signals_deferred(during: str) -> Iterator[None]:
  """Holds SIGINT and SIGTERM while the block runs; raises `Interrupted` after it if one came.

  A signal the process ignores stays ignored (a shell starts `cmd &` with SIGINT ignored: such a
  run ignores Ctrl-C's signal during a save as it does outside one). Only the main thread
  receives signals; elsewhere this does nothing.
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  received: list[int] = []

  def hold(signum, frame):
    del frame
    received.append(signum)

  held = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) != signal.SIG_IGN]
  previous = {s: signal.signal(s, hold) for s in held}
  try:
    yield
  finally:
    for s, handler in previous.items():
      signal.signal(s, signal.SIG_DFL if handler is None else handler)
  if received:
    raise Interrupted(received[0], during)
