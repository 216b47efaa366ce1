"""One writer per workdir: the lock a run holds for its whole length, and the block that writes.

`writing` holds an OS lock (``fcntl.flock`` on the workdir folder itself, and on ``workdir/lock``,
which names the holder) for the whole run, checks that
the workdir still holds what `gelujax.workdir.check_run` saw, and maps every disk error
(`gelujax.workdir.disk_errors`) into one `WorkdirError` line naming the file. The kernel releases
the lock when its process dies, however it dies, so a lock left by a killed run never blocks the
next one. The folder's own lock is what makes two writers impossible: a ``lock`` file removed
by hand (or by a cleaning script) while a run holds it is made anew by the next process, and
its lock would be taken; the folder's is the same folder's for as long as it exists.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

from gelujax.workdir.config import read_config
from gelujax.workdir.disk import DISK_ERRNOS, check_lock_file, disk_errors, quiet_disk_errors
from gelujax.workdir.files import LOCK_FILE, WorkdirError


class Lock:
  """The exclusive lock of one workdir, held from construction until `release`.

  Creates the workdir. The lock file holds the holder's pid and host, for the message that
  refuses a second process.

  Raises:
    WorkdirError: another process holds the lock, the workdir cannot be created, or its
      ``lock`` is not a file (`gelujax.workdir.disk.check_lock_file`).
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
          f"Cannot create `workdir` {workdir} ({e.strerror}); pass a folder that can be created."
        ) from None
      check_lock_file(workdir)
      folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.read(fd, 1000).decode(errors="replace").split()
      os.close(fd)
      os.close(folder)
      pid, host, since = [*holder, "?", "?", "?"][:3]
      raise WorkdirError(
        f"Workdir {workdir} is in use by process {pid} on host {host} (since {since}): one "
        "process writes a workdir at a time. Wait for it to finish (re-running the same "
        "command then resumes or reports the run), or pass another `workdir`."
      ) from None
    self._fd, self._folder = fd, folder
    since = datetime.datetime.now().isoformat(timespec="seconds")
    with contextlib.suppress(OSError):  # Only words for the message; a full disk keeps none.
      os.ftruncate(fd, 0)
      os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {since}\n".encode(), 0)

  def release(self) -> None:
    if self._fd is not None:
      fcntl.flock(self._fd, fcntl.LOCK_UN)
      fcntl.flock(self._folder, fcntl.LOCK_UN)
      os.close(self._fd)
      os.close(self._folder)
      self._fd = self._folder = None


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
  threading.excepthook = quiet_disk_errors(hook)
  try:
    if lead and read_config(workdir) != checked:
      raise WorkdirError(
        f"Workdir {workdir} was written by another process after this run checked it; its "
        "files are left as they are. Re-run the same command to check it again, or pass "
        "another `workdir`."
      )
    with disk_errors(workdir):
      yield
  finally:
    threading.excepthook = hook
    if lock is not None:
      lock.release()
