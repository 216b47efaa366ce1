"""A run's workdir stays whole: one writer, the run's config kept or rebuilt, bounds checked first.

* **One writer.** `writing` holds an OS lock (``fcntl.flock`` on ``workdir/lock``) for the
  whole run; a second process is refused in one line that names the holder's pid and host.
  The kernel releases the lock when its process dies, however it dies, so a lock left by a
  killed run never blocks the next one.
* **The run's config.** `read_config` returns the run that a workdir holds: its
  ``config.json``, or, when that is missing or not a run's config, the config recorded in its
  newest checkpoint (every checkpoint records it; see `gelujax.checkpoints`). `write_config`
  keeps a config.json that was not a run's config as ``config.json.damaged``.
* **The run's records.** A resume makes metrics.jsonl hold exactly the records up to the
  restored checkpoint, which carries them (`resume_metrics`): whatever was cut, deleted or
  changed before it is rewritten (the file kept as ``metrics.jsonl.damaged``), so the run ends
  byte-equal to an uninterrupted one.
* **Refused before any work, in one line:** a ``--workdir`` that is a file, on a read-only
  disk, not writable or not UTF-8; a smaller ``--epochs`` than the run already trained; results
  with no checkpoint to resume them from (`check_resumable`: training again from epoch 0 would
  overwrite them); a grid too big for memory (the grid's own values are checked by
  `gelujax.trainer.Members`).
* **Disk errors** while the run writes (a full disk) end it with one line naming the file;
  everything written before stays, and the same command resumes once there is space.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from gelujax import checkpoints, data, writers

LOCK_FILE = "lock"
RESUMABLE_FIELDS = checkpoints.RESUMABLE_FIELDS
# Host memory each member needs outside the device state: its TensorBoard event file and its
# config, metrics and summary records (measured as 125 KiB for tensorboardX's SummaryWriter,
# which gelujax used before it wrote event files itself; a bound for them now).
HOST_BYTES_PER_MEMBER = 128 * 1024


class WorkdirError(ValueError):
  """A workdir that cannot be used as asked; the message names it and what to do."""


# ------------------------------------------------------------------------ one writer


class Lock:
  """The exclusive lock of one workdir, held from construction until `release`.

  Creates the workdir. The lock file holds the holder's pid and host, for the message that
  refuses a second process.

  Raises:
    WorkdirError: another process holds the lock, or the workdir cannot be created.
  """

  def __init__(self, workdir: str):
    self.path = os.path.join(workdir, LOCK_FILE)
    with disk_errors(workdir):
      os.makedirs(workdir, exist_ok=True)
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 1000).decode(errors="replace").split()
      os.close(fd)
      pid, host, since = [*holder, "?", "?", "?"][:3]
      raise WorkdirError(
        f"Workdir {workdir} is in use by process {pid} on host {host} (since {since}): one "
        "process writes a workdir at a time. Wait for it to finish (re-running the same "
        "command then resumes or reports the run), or pass another --workdir."
      ) from None
    self._fd = fd
    since = datetime.datetime.now().isoformat(timespec="seconds")
    with contextlib.suppress(OSError):  # Only words for the message; a full disk keeps none.
      os.ftruncate(fd, 0)
      os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {since}\n".encode(), 0)

  def release(self) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      os.close(self._fd)
      self._fd = None


@contextlib.contextmanager
def writing(workdir: str, lead: bool = True) -> Iterator[None]:
  """The block writes ``workdir``: holds its lock (process 0 of a run, ``lead``, only) and turns
  a disk error into one `WorkdirError` line naming the file."""
  lock = Lock(workdir) if lead else None
  hook = threading.excepthook
  threading.excepthook = _quiet_disk_errors(hook)
  try:
    with disk_errors(workdir):
      yield
  finally:
    threading.excepthook = hook
    if lock is not None:
      lock.release()


def _quiet_disk_errors(hook):
  """A thread excepthook that keeps the disk errors of background writers (TensorBoard's)
  quiet: the run reports the full disk in one line when it next writes."""

  def excepthook(args):
    if isinstance(args.exc_value, OSError) and args.exc_value.errno in checkpoints.DISK_ERRNOS:
      return
    hook(args)

  return excepthook


@contextlib.contextmanager
def disk_errors(workdir: str) -> Iterator[None]:
  """Turns an OSError of a full, read-only or forbidden disk into a one-line `WorkdirError`."""
  try:
    yield
  except OSError as e:
    if e.errno not in checkpoints.DISK_ERRNOS:
      raise
    where = e.filename or f"a file in {workdir}"
    raise WorkdirError(
      f"Cannot write {where} ({os.strerror(e.errno)}). Everything written before is intact: "
      "make room or give write access on that disk and re-run the same command to resume, "
      "or pass another --workdir."
    ) from None


# ------------------------------------------------------------------ before any work


def check_writable(workdir: str) -> None:
  """Refuses a ``--workdir`` that is a file, cannot be written or is not UTF-8 (Orbax, which
  writes the checkpoints, takes UTF-8 paths only); touches nothing."""
  path = os.path.abspath(workdir)
  try:
    path.encode()
  except UnicodeEncodeError as e:  # Undecodable bytes of argv arrive as lone surrogates.
    raise WorkdirError(
      f"--workdir {os.fsencode(workdir)!r} is not UTF-8 (byte "
      f"0x{os.fsencode(path[e.start])[0]:02x}"
      f"{f' in its path {os.fsencode(path)!r}' if path != workdir else ''}); checkpoints are "
      "written by a library that takes UTF-8 paths only: pass a --workdir whose path is UTF-8."
    ) from None
  if os.path.exists(path) and not os.path.isdir(path):
    raise WorkdirError(
      f"--workdir {workdir} is a file, not a folder; pass a new folder or this run's workdir."
    )
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise WorkdirError(f"--workdir {workdir}: {existing} is a file, so it cannot hold a folder.")
  if os.statvfs(existing).f_flag & os.ST_RDONLY:
    raise WorkdirError(
      f"--workdir {workdir} is on a read-only file system ({existing}); pass a folder on a "
      "writable disk."
    )
  if not os.access(existing, os.W_OK | os.X_OK):
    raise WorkdirError(
      f"--workdir {workdir}: {existing} is not writable by this user (permission denied); pass "
      "a folder you can write."
    )


def check_member_count(count: int, flag: str = "--seeds") -> None:
  """Refuses a grid of ``count`` members that the host cannot even keep the records of
  (before the members are listed, so that a count like 99999999999999 fails at once)."""
  needed = count * HOST_BYTES_PER_MEMBER
  available = data.available_memory()
  if needed > available:
    raise WorkdirError(
      f"{flag} {count} asks for {count:,} members per learning rate; each needs at least "
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
    needed, available = per_device * len(devices) + host, data.available_memory()
    where = f"host memory ({len(devices)} CPU device{'s' * (len(devices) > 1)})"
  else:
    limits = [(d.memory_stats() or {}).get("bytes_limit") for d in devices]
    if None in limits:
      return  # The device does not say its memory; nothing to check against.
    needed, available = per_device, min(limits)
    where = f"memory of each {devices[0].device_kind}"
  if needed > available:
    raise WorkdirError(
      f"A grid of {members:,} members needs about {_gb(needed)} of {where} to train, but "
      f"{_gb(available)} is available: each member holds {_count(member_params)} parameters "
      f"and {_gb(state_bytes)} of state (twice during a step, plus gradients and updates), "
      f"and the data take {_gb(data_bytes)}. Train fewer members per run (fewer --seeds or "
      "--learning_rates, split over several --workdir)."
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


# ------------------------------------------------------------------------- the run


_CONFIG_KEYS = {"task": str, "dataset": str, "activation": str, "spec": dict, "members": list}


def config_problem(config: Any) -> str | None:
  """Why ``config`` is not a run's config.json object (None when it is one)."""
  if not isinstance(config, dict):
    return f"it holds a {type(config).__name__}, not an object"
  for key, kind in _CONFIG_KEYS.items():
    if not isinstance(config.get(key), kind):
      return f"its {key!r} is missing or not a {kind.__name__}"
  if "epochs" not in config["spec"]:
    return "its spec has no 'epochs'"
  for member in config["members"]:
    if not (isinstance(member, dict) and {"seed", "learning_rate"} <= set(member)):
      return f"member {member!r} is not {{'seed': ..., 'learning_rate': ...}}"
  if not config["members"]:
    return "it lists no members"
  return None


def read_config(workdir: str) -> dict[str, Any] | None:
  """The run that ``workdir`` holds: its config.json, or the config its newest checkpoint
  records when config.json is missing or not a run's config. None for a new workdir.

  Touches nothing (`write_config` writes the config back).

  Raises:
    WorkdirError: config.json is not a run's config and no checkpoint records the run, or the
      workdir holds results (metrics, summary) but no record of the run that wrote them.
  """
  path = os.path.join(workdir, writers.CONFIG_FILE)
  problem = None
  if os.path.exists(path):
    try:
      config = writers.read_json(path)
    except (ValueError, UnicodeDecodeError) as e:
      problem = str(e)
    else:
      problem = config_problem(config)
      if problem is None:
        return config
      problem = f"{path} is not a run's config: {problem}"
  recorded = recorded_config(workdir)
  if recorded is not None:
    return recorded
  if problem is not None:
    raise WorkdirError(
      f"{problem.rstrip('.')}. No checkpoint in {workdir}/checkpoints records the run to rebuild "
      "it from: put back the run's config.json (e.g. from version control), or pass another "
      "--workdir."
    )
  results = [
    name for name in (writers.METRICS_FILE, writers.SUMMARY_FILE) if _has_content(workdir, name)
  ]
  if results:
    raise WorkdirError(
      f"Workdir {workdir} holds {' and '.join(results)} but no config.json and no checkpoint "
      "recording the run that wrote them, so it cannot be resumed or extended: put back its "
      "config.json, or pass another --workdir."
    )
  return None


def _has_content(workdir: str, name: str) -> bool:
  path = os.path.join(workdir, name)
  return os.path.exists(path) and os.path.getsize(path) > 0


def recorded_config(workdir: str) -> dict[str, Any] | None:
  """The config recorded in the newest checkpoint whose record can be read (None if none)."""
  directory = os.path.join(workdir, checkpoints.CHECKPOINT_DIR)
  if not os.path.isdir(directory):
    return None
  for epoch in sorted(_finished_epochs(directory), reverse=True):
    path = os.path.join(directory, str(epoch), checkpoints.RECORD_ITEM, "metadata")
    try:
      with open(path) as f:
        config = json.load(f).get("config")
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
      continue
    if config_problem(config) is None:
      return config
  return None


def _finished_epochs(directory: str) -> list[int]:
  """The epochs of finished checkpoints (Orbax's unfinished ones carry a suffix)."""
  return [int(name) for name in os.listdir(directory) if name.isdigit()]


def write_config(workdir: str, config: dict[str, Any]) -> None:
  """Writes config.json, first keeping one that is not a run's config as
  ``config.json.damaged`` (nothing already written is lost)."""
  path = os.path.join(workdir, writers.CONFIG_FILE)
  if not os.path.exists(path) and trained_epochs(workdir):
    print(f"{path} was missing; rebuilt from the run's checkpoint.", file=sys.stderr)
  if os.path.exists(path):
    try:
      problem = config_problem(writers.read_json(path))
    except (ValueError, UnicodeDecodeError):
      problem = "unreadable"
    if problem is not None:
      kept = keep_aside(path)
      print(
        f"{path} was not a run's config ({problem}); kept as {kept} and rebuilt from the "
        "run's checkpoint.",
        file=sys.stderr,
      )
  writers.write_json(path, config)


def keep_aside(path: str) -> str:
  """Renames a file that is about to be rebuilt to ``<path>.damaged`` (``.damaged.2``, ... when
  taken: nothing is overwritten) and returns its new path."""
  target, n = f"{path}.damaged", 1
  while os.path.exists(target):
    n += 1
    target = f"{path}.damaged.{n}"
  os.replace(path, target)
  return target


def trained_epochs(workdir: str) -> int:
  """The newest epoch a finished checkpoint of ``workdir`` holds (0 without one)."""
  directory = os.path.join(workdir, checkpoints.CHECKPOINT_DIR)
  epochs = _finished_epochs(directory) if os.path.isdir(directory) else []
  return max(epochs, default=0)


def check_epochs(workdir: str, epochs: int) -> None:
  """Refuses to report a run trained further than ``epochs`` under that smaller number."""
  trained = trained_epochs(workdir)
  if trained > epochs:
    raise WorkdirError(
      f"Workdir {workdir} holds this run trained for {trained} epochs, more than --epochs "
      f"{epochs}; its files are left as they are. Pass --epochs {trained} to report it as it "
      "is, a larger --epochs to train it further, or another --workdir."
    )


def check_resumable(workdir: str) -> None:
  """Refuses a workdir that holds results but no finished checkpoint to resume them from.

  Training again from epoch 0 would overwrite the results, which gelujax never does by itself.
  A run saves a checkpoint after its first epoch, so records of epoch 1 at most, without a
  checkpoint, are those of a run stopped before that save: a restart writes them again.
  """
  if trained_epochs(workdir):
    return
  results = [writers.SUMMARY_FILE] if _has_content(workdir, writers.SUMMARY_FILE) else []
  last = max((_epoch_of(r) for r in writers.read_metrics(workdir)), default=0.0)
  if last > 1:
    results.insert(0, f"{writers.METRICS_FILE} up to epoch {last:g}")
  if results:
    raise WorkdirError(
      f"Workdir {workdir} holds the run's results ({' and '.join(results)}) but no checkpoint "
      f"to resume them from ({os.path.join(workdir, checkpoints.CHECKPOINT_DIR)} is missing or "
      "holds no finished checkpoint). Training again from epoch 0 would overwrite them, which "
      "gelujax never does by itself: put back the run's checkpoints to resume it, or pass another "
      "--workdir to train the grid again."
    )


def _epoch_of(record: Any) -> float:
  """A metrics record's epoch (+inf when it has none: a record no run wrote)."""
  epoch = record.get("epoch") if isinstance(record, dict) else None
  return float(epoch) if isinstance(epoch, int | float) else float("inf")


def resume_metrics(
  workdir: str,
  epoch: int,
  recorded: Sequence[dict[str, Any]] | None,
  evaluations: Sequence[tuple[int, float, int]],
) -> list[dict[str, Any]]:
  """Makes metrics.jsonl hold exactly the run's records up to ``epoch``, that of the checkpoint a
  run resumes from, and returns them.

  The resumed run writes the records after ``epoch`` again: those (and a last line cut short)
  are dropped. The records up to ``epoch`` are those its checkpoint holds (``recorded``); where
  metrics.jsonl lost, cut or changed any of them, it is kept as ``metrics.jsonl.damaged`` and
  rewritten from them, with one line on stderr. A checkpoint written before checkpoints held
  the records (``recorded`` None) restores none: metrics.jsonl must then hold one record for
  each of ``evaluations``, the ``(member, epoch, step)`` of every record up to ``epoch`` in
  order.

  Raises:
    WorkdirError: ``recorded`` is None and metrics.jsonl lacks (or repeats) a record.
  """
  path = os.path.join(workdir, writers.METRICS_FILE)
  if recorded is None:
    kept = [r for r in writers.read_metrics(workdir) if _epoch_of(r) <= epoch]
    found = [(r.get("member"), r["epoch"], r.get("step")) for r in kept]
    if found != list(evaluations):
      detail = _first_difference([_describe_key(k) for k in found], evaluations)
      raise WorkdirError(
        f"{path} does not hold the run's records up to epoch {epoch} ({detail}), and its "
        f"checkpoint of epoch {epoch}, written by an older gelujax, holds none to restore them "
        "from. The files are left as they are: put back a good copy of metrics.jsonl, or pass "
        "another --workdir to train the grid again."
      )
    writers.write_metrics(workdir, kept)
    return kept
  expected = writers.metrics_lines(recorded).encode()
  data = _read_bytes(path)
  problem = _metrics_problem(data, expected, epoch, evaluations)
  if problem is not None:
    kept = keep_aside(path) if data is not None else None
    print(
      f"{path} {problem}; rewritten from the checkpoint of epoch {epoch}, which holds its "
      f"records{f', and the previous file kept as {kept}' if kept else ''}.",
      file=sys.stderr,
    )
  writers.write_metrics(workdir, recorded)
  return list(recorded)


def _read_bytes(path: str) -> bytes | None:
  try:
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def _describe_key(key: tuple[Any, Any, Any]) -> str:
  member, epoch, _ = key
  return f"the record of member {member} at epoch {epoch:g}"


def _first_difference(found: Sequence[str], evaluations: Sequence[tuple[int, float, int]]) -> str:
  """Where records described by ``found`` first depart from ``evaluations``'."""
  for i, key in enumerate(evaluations):
    expected = _describe_key(key)
    if i >= len(found):
      return f"it ends before {expected}, record {i + 1}"
    if found[i] != expected:
      return f"record {i + 1} is {found[i]}, not {expected}"
  return f"record {len(evaluations) + 1} is {found[len(evaluations)]}, one more than the run wrote"


def _metrics_problem(
  data: bytes | None, expected: bytes, epoch: int, evaluations: Sequence[tuple[int, float, int]]
) -> str | None:
  """What is wrong with metrics.jsonl (``data``) for a resume from ``epoch``, whose records
  are ``expected``; None when it starts with them and holds nothing after them but records of
  later epochs and a last line cut short (what a run stopped after the checkpoint leaves)."""
  if data is None:
    return "was missing" if expected else None
  lines = data.split(b"\n")
  if not data.startswith(expected):
    for i, line in enumerate(expected.split(b"\n")[:-1]):
      described = _describe_key(evaluations[i]) if i < len(evaluations) else f"record {i + 1}"
      if i >= len(lines) - 1:  # The last element of a split is never a whole line.
        return f"ends before {described}, line {i + 1}"
      if lines[i] != line:
        return f"does not hold {described} on line {i + 1}, as the run wrote it"
  after = lines[expected.count(b"\n") :]
  for i, line in enumerate(after):
    number = expected.count(b"\n") + i + 1
    if not line.strip(b"\0 \t\r") or i == len(after) - 1:
      continue  # Blank, or the last line: not ended by a newline, an append cut short.
    try:
      record = json.loads(line)
    except ValueError:
      return f"has a line {number} that is not a JSON record"
    if _epoch_of(record) <= epoch:
      return f"has a record of epoch {epoch} or before on line {number}, after the run's records"
  return None
