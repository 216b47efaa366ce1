"""Everything about a run's folder: its file names, config.json and the run's identity, the
lock, the records, and the errors of its disk.

* **Files.** Every name inside a workdir is here (`CONFIG_FILE`, `METRICS_FILE`, ...), and so is
  reading and writing its JSON files (`read_json`, `write_json`: atomic) and metrics.jsonl
  (`read_metrics` tolerates a last line cut short; `metrics_lines` is the one text of records).
* **The run.** `make_config` is the config.json object of a run; its `identity` (a hash less
  `RESUMABLE_FIELDS`) is what every checkpoint records. `check_run` refuses, before any work, a
  workdir that holds another run, a smaller ``--epochs`` than it trained, or results with no
  checkpoint to resume them from. `read_config` returns the run a workdir holds: its
  config.json, or, when that is missing or not a run's config, the config recorded in its
  newest checkpoint; `write_config` keeps a broken config.json as ``config.json.damaged``.
* **One writer.** `writing` holds an OS lock (``fcntl.flock`` on ``workdir/lock``) for the whole
  run, checks that the workdir still holds what `check_run` saw, and maps every disk error
  (`disk_errors`) into one `WorkdirError` line naming the file. The kernel releases the lock when
  its process dies, however it dies, so a lock left by a killed run never blocks the next one.
* **The run's records.** A resume makes metrics.jsonl hold exactly the records up to the
  restored checkpoint, which carries them (`resume_metrics`): whatever was cut, deleted or
  changed before it is rewritten (the file kept as ``metrics.jsonl.damaged``), so the run ends
  byte-equal to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import fcntl
import hashlib
import json
import math
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from gelujax.members import Members

# ------------------------------------------------------------------------------ file names

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINT_DIR = "checkpoints"
DAMAGED_DIR = "damaged"  # Checkpoints that cannot be used, moved aside (never deleted).
LOCK_FILE = "lock"
# The item beside a checkpoint's state that records the run, and the file Orbax's JSON handler
# writes inside it: ``checkpoints/<epoch>/gelujax/metadata``.
RECORD_ITEM = "gelujax"
RECORD_FILE = "metadata"

# Fields of a run's spec that may change when it is resumed; the identity leaves them out.
RESUMABLE_FIELDS = ("epochs",)
# config.json's record of a user's activation (`gelujax.specs.activation_source`).
ACTIVATION_SOURCE = "activation_source"
# Spec fields added after runs were committed: config.json leaves each out at its default, so
# the configs (and identities) of runs written before it stay the same.
OMITTED_AT_DEFAULT = {"dropout_bits": "hash", "dtype": "float32"}
# OS errors that mean the workdir's disk cannot take the write, not a bug.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


class WorkdirError(ValueError):
  """A workdir that cannot be used as asked; the message names it and what to do."""


def checkpoint_epochs(workdir: str) -> list[int]:
  """The epochs of the finished checkpoints of ``workdir``, oldest first (Orbax's unfinished
  ones carry a suffix and are left out)."""
  directory = os.path.join(workdir, CHECKPOINT_DIR)
  if not os.path.isdir(directory):
    return []
  return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


# ------------------------------------------------------------------------ JSON and records


def to_json_number(value: Any) -> float | None:
  """A float for JSON, or None where it is not finite (JSON has no NaN or Infinity)."""
  value = float(value)
  return value if math.isfinite(value) else None


def jsonable(obj: Any) -> Any:
  """``obj`` with non-finite floats as None and NumPy scalars and arrays as Python values."""
  if isinstance(obj, Mapping):
    return {str(k): jsonable(v) for k, v in obj.items()}
  if isinstance(obj, list | tuple | np.ndarray):
    return [jsonable(v) for v in obj]
  if isinstance(obj, float | np.floating):
    return to_json_number(obj)
  if isinstance(obj, np.integer | np.bool_):
    return obj.item()
  return obj


def write_json(path: str | os.PathLike, obj: Any) -> None:
  """Writes ``jsonable(obj)`` atomically (readers, and a run killed at any moment, see the old
  file or the new one, never a part), creating the parent directory."""
  text = json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n"  # Fails before writing.
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  _replace_atomically(path, text)


def _replace_atomically(path: str | os.PathLike, text: str) -> None:
  """Writes ``text`` to a temporary file beside ``path``, then renames it over ``path``; a
  failed write (a full disk) removes the temporary file and leaves ``path`` as it was."""
  tmp = f"{path}.tmp"
  try:
    with open(tmp, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    if isinstance(e, OSError) and e.filename is None:
      e.filename = str(path)  # Name the file in the error, not its temporary twin.
    raise


def read_json(path: str | os.PathLike) -> Any:
  """Reads one JSON file, naming the file and the line when it is malformed."""
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(
      f"{path}, line {e.lineno}: not valid JSON ({e.msg}, column {e.colno}); the file is left "
      "as it is: fix it, or put back a good copy."
    ) from None


def read_metrics(workdir: str | os.PathLike) -> list[dict[str, Any]]:
  """The records of ``workdir/metrics.jsonl`` in file order ([] when there is none).

  A last line that is cut short (the append of a run killed or out of disk space mid-write) is
  left out: the run rewrites it when resumed. Any other line that is not a JSON record raises
  a ValueError naming the file and the line.
  """
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path, "rb") as f:
    data = f.read()
  lines = data.split(b"\n")
  records = []
  for number, line in enumerate(lines, 1):
    if not line.strip(b"\0 \t\r"):
      continue
    try:
      record = json.loads(line)
      if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    except ValueError as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
      if number == len(lines):  # Not ended by a newline: an append that was cut short.
        break
      raise ValueError(
        f"{path}, line {number}: not a JSON record ({e}); the file is left as it is: fix or "
        "remove that line, or put back a good copy."
      ) from None
    records.append(record)
  return records


def metrics_lines(records: Iterable[dict[str, Any]]) -> str:
  """The text of metrics.jsonl for ``records``: one JSON object a line, as the run appends them
  (a record read back with `read_metrics` gives the same line, byte for byte)."""
  return "".join(json.dumps(record, allow_nan=False) + "\n" for record in records)


def write_metrics(workdir: str, records: Iterable[dict[str, Any]]) -> None:
  """Replaces metrics.jsonl with ``records``, atomically."""
  _replace_atomically(os.path.join(workdir, METRICS_FILE), metrics_lines(records))


# -------------------------------------------------------------------------- the run's identity


def make_config(task: Any, members: Members) -> dict[str, Any]:
  """The config.json object of a run of ``task`` (a `gelujax.tasks.TaskSpec`) over ``members``
  (JSON types only); its spec holds the grid's learning rates and seed count, so config.json
  names one grid only. A field of `OMITTED_AT_DEFAULT` is left out at its default."""
  spec = dataclasses.asdict(task)
  spec.update(learning_rates=members.learning_rates, seeds=len(members.seeds))
  spec = {
    k: v for k, v in spec.items() if k not in OMITTED_AT_DEFAULT or v != OMITTED_AT_DEFAULT[k]
  }
  config = {
    "task": task.name,
    "dataset": task.dataset,
    "activation": task.activation,
    "spec": spec,
    "members": members.to_json(),
  }
  from gelujax.specs import activation_source  # here: reading runs needs no JAX

  source = activation_source(task.activation)
  if source is not None:  # the user's function: its module, name and file's sha256
    config[ACTIVATION_SOURCE] = source
  return json.loads(json.dumps(config))


def identity(config: Mapping[str, Any]) -> str:
  """The run's identity: a hash of its config (task, spec, members, and a user activation's
  module, function and source sha256) less `RESUMABLE_FIELDS`."""
  spec = {k: v for k, v in config["spec"].items() if k not in RESUMABLE_FIELDS}
  fields = {"task": config["task"], "spec": spec, "members": config["members"]}
  if ACTIVATION_SOURCE in config:
    fields[ACTIVATION_SOURCE] = _source_identity(config[ACTIVATION_SOURCE])
  text = json.dumps(fields, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_identity(source: Mapping[str, Any] | None) -> tuple | None:
  """What of a user activation's record the run depends on: not the file's path (a checkout
  may move), its module, function and bytes."""
  if source is None:
    return None
  return (source.get("module"), source.get("function"), source.get("sha256"))


def _describe_source(source: Mapping[str, Any] | None) -> str:
  if source is None:
    return "none (gelujax's own)"
  digest = (source.get("sha256") or "unknown")[:12]
  return f"{source.get('module')}.{source.get('function')} in {source.get('file')} sha256 {digest}"


def check_run(task: Any, workdir: str, members: Members) -> dict[str, Any] | None:
  """Checks that ``workdir`` can take the run: free, or holding this same run to resume.

  Touches nothing. `gelujax.engine.fit` calls it once, before any work, and passes what it
  returns to `writing`, which refuses the workdir if another process changed it since.

  Returns:
    The config of the run the workdir holds (`read_config`), None for a new workdir.

  Raises:
    WorkdirError: naming what differs or what is wrong, and what to do.
  """
  check_writable(workdir)
  old = read_config(workdir)
  if old is None:
    return None
  new = make_config(task, members)
  old_spec, new_spec = ({**OMITTED_AT_DEFAULT, **c["spec"]} for c in (old, new))
  differences = [
    f"{key} {old_spec.get(key)!r} (now {value!r})"
    for key, value in new_spec.items()
    if key not in (*RESUMABLE_FIELDS, "learning_rates", "seeds") and old_spec.get(key) != value
  ]
  old_source, new_source = (c.get(ACTIVATION_SOURCE) for c in (old, new))
  if _source_identity(old_source) != _source_identity(new_source):
    differences.append(
      f"the activation's source {_describe_source(old_source)} (now "
      f"{_describe_source(new_source)}): its code changed since the run trained with it"
    )
  if old["members"] != new["members"]:
    old_members = Members.from_json(old["members"])
    text = f"members {old_members.describe()} (now {members.describe()})"
    if sorted(old_members) == sorted(members):
      text += (
        " (the same members in another order: members are numbered in the order that "
        "--learning_rates and --seeds give them)"
      )
    differences.append(text)
  if differences:
    raise WorkdirError(
      f"Workdir {workdir} holds another run (task {old['task']!r}) that differs in: "
      f"{'; '.join(differences)}. Pass another --workdir, or the same settings to resume it "
      "(only --epochs may change)."
    )
  check_epochs(workdir, task.epochs)
  check_resumable(workdir)
  return old


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
      try:
        os.makedirs(workdir, exist_ok=True)
      except OSError as e:
        if e.errno in DISK_ERRNOS:
          raise
        raise WorkdirError(
          f"Cannot create --workdir {workdir} ({e.strerror}); pass a folder that can be created."
        ) from None
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
def writing(
  workdir: str, lead: bool = True, checked: dict[str, Any] | None = None
) -> Iterator[None]:
  """The block writes ``workdir``: holds its lock (process 0 of a run, ``lead``, only) and turns
  a disk error into one `WorkdirError` line naming the file.

  ``checked`` is what `check_run` returned: a workdir that holds another run now (a process
  that wrote it between the check and the lock) is refused, untouched.
  """
  lock = Lock(workdir) if lead else None
  hook = threading.excepthook
  threading.excepthook = _quiet_disk_errors(hook)
  try:
    if lead and read_config(workdir) != checked:
      raise WorkdirError(
        f"Workdir {workdir} was written by another process after this run checked it; its "
        "files are left as they are. Re-run the same command to check it again, or pass "
        "another --workdir."
      )
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
    if isinstance(args.exc_value, OSError) and args.exc_value.errno in DISK_ERRNOS:
      return
    hook(args)

  return excepthook


@contextlib.contextmanager
def disk_errors(workdir: str, what: str | None = None) -> Iterator[None]:
  """Turns an error of a full, read-only or forbidden disk into a one-line `WorkdirError`: an
  OSError, or one that a library (Orbax, TensorStore) wraps or names in its message.

  Args:
    workdir: the run's folder.
    what: what was being written (default: the file the error names).
  """
  try:
    yield
  except Exception as e:
    reason = disk_error_reason(e)
    if reason is None:
      gone = _deleted_folder(workdir, e)
      if gone is None:
        raise
      raise WorkdirError(
        f"{gone} was deleted while this run was writing it (by another process?), so "
        f"{what or 'the run'} could not be written; what was deleted is lost. Re-run the same "
        "command to resume from what is left (or start afresh), or pass another --workdir."
      ) from None
    where = what or getattr(e, "filename", None) or f"a file in {workdir}"
    raise WorkdirError(
      f"Cannot write {where} ({reason}). Everything written before is intact: "
      "make room or give write access on that disk and re-run the same command to resume, "
      "or pass another --workdir."
    ) from None


def _deleted_folder(workdir: str, error: BaseException | None) -> str | None:
  """What of the workdir was deleted when ``error`` (or what it wraps; TensorStore names the
  OS error in its message) says a file was not found: the workdir, or its checkpoints folder,
  if gone now, else "a file or folder in <workdir>" when the error names a path inside it; None
  for any other error."""
  missing = os.strerror(errno.ENOENT)
  while error is not None:
    if (isinstance(error, OSError) and error.errno == errno.ENOENT) or missing in str(error):
      for folder in (workdir, os.path.join(workdir, CHECKPOINT_DIR)):
        if not os.path.isdir(folder):
          return folder
      named = f"{getattr(error, 'filename', None)} {error}"
      return f"a file or folder in {workdir}" if os.path.abspath(workdir) in named else None
    error = error.__cause__ or error.__context__
  return None


def disk_error_reason(error: BaseException | None) -> str | None:
  """The OS's words when ``error`` (or what it wraps; TensorStore reports OS errors in its
  message) says the disk cannot take a write: full, read-only, not permitted; else None."""
  while error is not None:
    if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
      return os.strerror(error.errno)
    for e in DISK_ERRNOS:
      if os.strerror(e) in str(error):
        return os.strerror(e)
    error = error.__cause__ or error.__context__
  return None


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
  longest = os.pathconf(existing, "PC_NAME_MAX")
  for name in path[len(existing) :].split(os.sep):
    if len(os.fsencode(name)) > longest:
      raise WorkdirError(
        f"--workdir {workdir}: the folder name {name[:40]!r}... is {len(os.fsencode(name))} "
        f"bytes, longer than the {longest} its file system allows; pass a shorter name."
      )
  if path != existing:  # A new folder: one that can be made there (not, say, in /proc).
    try:
      os.rmdir(tempfile.mkdtemp(prefix=".gelujax-check-", dir=existing))
    except OSError as e:
      raise WorkdirError(
        f"--workdir {workdir}: no folder can be created in {existing} ({e.strerror}); pass a "
        "folder on a disk you can write."
      ) from None


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
  path = os.path.join(workdir, CONFIG_FILE)
  problem = None
  if os.path.exists(path):
    try:
      config = read_json(path)
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
  results = [name for name in (METRICS_FILE, SUMMARY_FILE) if _has_content(workdir, name)]
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
  for epoch in reversed(checkpoint_epochs(workdir)):
    path = os.path.join(workdir, CHECKPOINT_DIR, str(epoch), RECORD_ITEM, RECORD_FILE)
    try:
      with open(path) as f:
        config = json.load(f).get("config")
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
      continue
    if config_problem(config) is None:
      return config
  return None


def write_config(workdir: str, config: dict[str, Any]) -> None:
  """Writes config.json, first keeping one that is not a run's config as
  ``config.json.damaged`` (nothing already written is lost)."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path) and trained_epochs(workdir):
    print(f"{path} was missing; rebuilt from the run's checkpoint.", file=sys.stderr)
  if os.path.exists(path):
    try:
      problem = config_problem(read_json(path))
    except (ValueError, UnicodeDecodeError):
      problem = "unreadable"
    if problem is not None:
      kept = keep_aside(path)
      print(
        f"{path} was not a run's config ({problem}); kept as {kept} and rebuilt from the "
        "run's checkpoint.",
        file=sys.stderr,
      )
  write_json(path, config)


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
  return max(checkpoint_epochs(workdir), default=0)


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
  results = [SUMMARY_FILE] if _has_content(workdir, SUMMARY_FILE) else []
  last = max((_epoch_of(r) for r in read_metrics(workdir)), default=0.0)
  if last > 1:
    results.insert(0, f"{METRICS_FILE} up to epoch {last:g}")
  if results:
    raise WorkdirError(
      f"Workdir {workdir} holds the run's results ({' and '.join(results)}) but no checkpoint "
      f"to resume them from ({os.path.join(workdir, CHECKPOINT_DIR)} is missing or "
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
  path = os.path.join(workdir, METRICS_FILE)
  if recorded is None:
    kept = [r for r in read_metrics(workdir) if _epoch_of(r) <= epoch]
    found = [(r.get("member"), r["epoch"], r.get("step")) for r in kept]
    if found != list(evaluations):
      detail = _first_difference([_describe_key(k) for k in found], evaluations)
      raise WorkdirError(
        f"{path} does not hold the run's records up to epoch {epoch} ({detail}), and its "
        f"checkpoint of epoch {epoch}, written by an older gelujax, holds none to restore them "
        "from. The files are left as they are: put back a good copy of metrics.jsonl, or pass "
        "another --workdir to train the grid again."
      )
    write_metrics(workdir, kept)
    return kept
  expected = metrics_lines(recorded).encode()
  data = _read_bytes(path)
  problem = _metrics_problem(data, expected, epoch, evaluations)
  if problem is not None:
    kept = keep_aside(path) if data is not None else None
    print(
      f"{path} {problem}; rewritten from the checkpoint of epoch {epoch}, which holds its "
      f"records{f', and the previous file kept as {kept}' if kept else ''}.",
      file=sys.stderr,
    )
  write_metrics(workdir, recorded)
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
