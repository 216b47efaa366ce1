"""The errors of a run's disk: a workdir refused before any work, and a failed write in one line.

`check_writable` refuses, touching nothing, a workdir that is a file, is not UTF-8 or cannot be
created or written, or whose ``lock`` is not a file (`check_lock_file`). `disk_errors` turns an
error of a full, read-only or forbidden disk, or of a folder deleted under the run, into one
`WorkdirError` line naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shlex
import stat
import tempfile
import types
from collections.abc import Iterator

from gelujax.workdir.files import (
  CHECKPOINT_DIR,
  CONFIG_FILE,
  DAMAGED_DIR,
  LOCK_FILE,
  METRICS_FILE,
  SUMMARY_FILE,
  TENSORBOARD_DIR,
  WorkdirError,
  trained_epochs,
)
from gelujax.workdir.records import unresumable_results

# OS errors that mean the workdir's disk cannot take the write, not a bug.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO)


def check_writable(workdir: str) -> None:
  """Refuses a ``workdir`` that is a file, cannot be written, is not UTF-8 (Orbax, which
  writes the checkpoints, takes UTF-8 paths only) or whose lock is not a file; touches
  nothing."""
  path = os.path.abspath(workdir)
  try:
    path.encode()
  except UnicodeEncodeError as e:  # Undecodable bytes of argv arrive as lone surrogates.
    raise WorkdirError(
      f"`workdir` {os.fsencode(workdir)!r} is not UTF-8 (byte "
      f"0x{os.fsencode(path[e.start])[0]:02x}"
      f"{f' in its path {os.fsencode(path)!r}' if path != workdir else ''}); checkpoints are "
      "written by a library that takes UTF-8 paths only: pass a `workdir` whose path is UTF-8."
    ) from None
  if os.path.exists(path) and not os.path.isdir(path):
    raise WorkdirError(
      f"`workdir` {workdir} is a file, not a folder; pass a new folder or this run's workdir."
    )
  check_lock_file(workdir)
  check_entries(workdir)
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise WorkdirError(f"`workdir` {workdir}: {existing} is a file, so it cannot hold a folder.")
  if os.statvfs(existing).f_flag & os.ST_RDONLY:
    raise WorkdirError(
      f"`workdir` {workdir} is on a read-only file system ({existing}); pass a folder on a "
      "writable disk."
    )
  if not os.access(existing, os.W_OK | os.X_OK):
    raise WorkdirError(
      f"`workdir` {workdir}: {existing} is not writable by this user (permission denied); pass "
      "a folder you can write."
    )
  most = os.pathconf(existing, "PC_PATH_MAX")
  if len(os.fsencode(path)) + _DEEPEST > most:
    raise WorkdirError(
      f"`workdir` {workdir[:60]}... is a path of {len(os.fsencode(path)):,} bytes: the run's "
      f"files lie up to {_DEEPEST} bytes deeper (a checkpoint's arrays, a TensorBoard file), "
      f"beyond the {most:,} a path may have on this system; pass a shorter `workdir`."
    )
  longest = os.pathconf(existing, "PC_NAME_MAX")
  for name in path[len(existing) :].split(os.sep):
    if len(os.fsencode(name)) > longest:
      raise WorkdirError(
        f"`workdir` {workdir}: the folder name {name[:40]!r}... is {len(os.fsencode(name))} "
        f"bytes, longer than the {longest} its file system allows; pass a shorter name."
      )
  if path != existing:  # A new folder: one that can be made there (not, say, in /proc).
    try:
      os.rmdir(tempfile.mkdtemp(prefix=".gelujax-check-", dir=existing))
    except OSError as e:
      raise WorkdirError(
        f"`workdir` {workdir}: no folder can be created in {existing} ({e.strerror}); pass a "
        "folder on a disk you can write."
      ) from None


# How far below the workdir the run's deepest path may reach, in bytes: a checkpoint's array
# file while Orbax writes it (checkpoints/<epoch>.orbax-checkpoint-tmp-<n>/default/
# ocdbt.process_0/d/<32 hex digits>: about 120) or a TensorBoard file (tensorboard/<member>/
# events.out.tfevents.<time>.<host name>), with room to spare.
_DEEPEST = 512

# What a workdir holds under each name, when it holds it: a file or a folder.
_ENTRIES = {
  CONFIG_FILE: "file",
  METRICS_FILE: "file",
  SUMMARY_FILE: "file",
  TENSORBOARD_DIR: "folder",
  CHECKPOINT_DIR: "folder",
  DAMAGED_DIR: "folder",
}


def check_entries(workdir: str) -> None:
  """Refuses a workdir where one of the run's names holds the other kind (``metrics.jsonl`` a
  folder, ``tensorboard`` a file): nothing is written and what is there is left as it is.

  Raises:
    WorkdirError: naming the path, what it is, and the command that moves it aside.
  """
  for name, kind in _ENTRIES.items():
    path = os.path.join(workdir, name)
    if not os.path.lexists(path) or (os.path.isdir(path) == (kind == "folder")):
      continue
    found = "a folder" if os.path.isdir(path) else "a file" if os.path.isfile(path) else "neither"
    if found == "neither":
      found = "a link to nothing" if os.path.islink(path) else "a pipe, socket or device"
    aside = _unused_name(path)
    raise WorkdirError(
      f"Workdir {workdir} holds {path}, which is {found}, where the run keeps a {kind}; what is "
      f"there is left as it is and nothing was written. Move it aside (`mv {shlex.quote(path)} "
      f"{shlex.quote(aside)}`) and re-run the same command (a resume rebuilds the run's files "
      "from its checkpoint), or pass another `workdir`."
    )


def check_lock_file(workdir: str) -> None:
  """Refuses a workdir whose ``lock`` is there but is not a file that the lock can be taken on
  (a folder, a link to nothing, a pipe): nothing is created, in the workdir or where a link
  points, and what is there is left as it is.

  Raises:
    WorkdirError: naming the path, what it is, and the command that moves it aside.
  """
  path = os.path.join(workdir, LOCK_FILE)
  try:
    mode = os.stat(path).st_mode  # through a link: a link to a file is a lock file
  except FileNotFoundError:
    if not os.path.islink(path):
      return  # none yet: the run creates it
    problem = f"is a symbolic link to {os.readlink(path)}, which does not exist"
  except OSError as e:
    if e.errno != errno.ELOOP:
      return  # a disk error: said when the lock is taken (`disk_errors`)
    problem = "is a symbolic link that leads back to itself"
  else:
    if stat.S_ISREG(mode):
      return
    kind = "a folder" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) else None
    problem = f"is {kind or 'a socket or a device'}, not a file" + (
      f" (through a symbolic link to {os.readlink(path)})" if os.path.islink(path) else ""
    )
  aside = _unused_name(path)
  raise WorkdirError(
    f"Workdir {workdir} cannot be locked: its lock file {path} {problem}. gelujax keeps a plain "
    "file there, holding the pid and host of the process that writes the workdir; what is "
    f"there is left as it is and nothing was written. Move it aside (`mv {shlex.quote(path)} "
    f"{shlex.quote(aside)}`) and re-run the same command, or pass another `workdir`."
  )


@contextlib.contextmanager
def disk_errors(workdir: str, what: str | None = None) -> Iterator[None]:
  """Turns an error of a full, read-only or forbidden disk into a one-line `WorkdirError`: an
  OSError, or one that a library (Orbax, TensorStore) wraps or names in its message.

  Args:
    workdir: the run's folder.
    what: what was being written, said beside the file the error names.
  """
  try:
    yield
  except WorkdirError:  # said already, by an inner block that knew more
    raise
  except Exception as e:
    reason = disk_error_reason(e)
    if reason is None:
      gone = _deleted_folder(workdir, e)
      if gone is None:
        raise
      raise WorkdirError(
        f"{gone} was deleted while this run was writing it (by another process?), so "
        f"{what or 'the run'} could not be written; what was deleted is lost. "
        f"{_what_is_left(workdir)}"
      ) from None
    file = failed_file(e)
    where = f"{file or what or f'a file in {workdir}'} ({reason})"
    if file and what and what != file:
      where += f", part of {what}"
    raise WorkdirError(
      f"Cannot write {where}. Everything written before is intact: "
      "make room or give write access on that disk and re-run the same command to resume, "
      "or pass another `workdir`."
    ) from None


def _what_is_left(workdir: str) -> str:
  """What re-running the same command does with what a deletion left of ``workdir``, and what
  else the user can do: the words that end the message of a deletion."""
  try:
    results = unresumable_results(workdir)
  except (OSError, ValueError):  # records that cannot be read: the re-run names them
    results = []
  if results:
    path = os.path.normpath(workdir)
    return (
      f"What is left of {workdir} holds the run's results ({' and '.join(results)}) but no "
      "checkpoint, so the run cannot resume (re-running the same command refuses: gelujax "
      "never trains over results by itself). To start over with nothing lost, move the workdir "
      f"aside (`mv {shlex.quote(path)} {shlex.quote(_unused_name(path))}`) and re-run the same "
      "command, or pass another `workdir`."
    )
  trained = trained_epochs(workdir)
  if trained:
    return (
      "Re-run the same command to resume from what is left (its newest checkpoint is of epoch "
      f"{trained}), or pass another `workdir`."
    )
  return "Re-run the same command to train the run from the start, or pass another `workdir`."


def _unused_name(path: str) -> str:
  """``<path>.old`` (``.old.2``, ... when taken): where to move ``path`` aside."""
  aside, n = f"{path}.old", 1
  while os.path.lexists(aside):
    n += 1
    aside = f"{path}.old.{n}"
  return aside


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


# A file's path in an error's words, as TensorStore quotes it ('Failed writing:
# "/w/checkpoints/..."'): not a folder (ending in /), nor a path escaped inside the JSON spec
# TensorStore appends ('[tensorstore_spec=\'{\\"path\\":\\"/w/.../ocdbt.process_0/\\"...').
_QUOTED_PATH = re.compile(r'"(/[^"\\]*[^"/\\])"')
_SPEC = " [tensorstore_spec="


def failed_file(error: BaseException | None) -> str | None:
  """The file that ``error`` (or what it wraps) says could not be written: an OSError's
  ``filename``; else the last path quoted in a library's words (TensorStore names the
  database, then the file); else the file open where the write failed (a library's ``f.write``
  or ``f.close`` raises an OSError that names no file). None when none is found."""
  while error is not None:
    if isinstance(error, OSError) and error.filename is not None:
      return os.fsdecode(error.filename)
    paths = _QUOTED_PATH.findall(str(error).split(_SPEC)[0])
    if paths:
      return paths[-1]
    if isinstance(error, OSError):
      file = _open_file(error.__traceback__)
      if file is not None:
        return file
    error = error.__cause__ or error.__context__
  return None


def _open_file(traceback: types.TracebackType | None) -> str | None:
  """The path of a file object held by the innermost frame of ``traceback`` that holds one."""
  frames = []
  while traceback is not None:
    frames.append(traceback.tb_frame)
    traceback = traceback.tb_next
  for frame in reversed(frames):
    for value in frame.f_locals.values():
      name = getattr(value, "name", None) if isinstance(value, io.IOBase) else None
      if isinstance(name, str) and os.path.isabs(name):
        return name
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


def quiet_disk_errors(hook):
  """A thread excepthook that keeps the disk errors of background writers (TensorBoard's)
  quiet: the run reports the full disk in one line when it next writes."""

  def excepthook(args):
    if isinstance(args.exc_value, OSError) and args.exc_value.errno in DISK_ERRNOS:
      return
    hook(args)

  return excepthook
