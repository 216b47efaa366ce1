"""Fetching a data set's published files into the cache on first use: `fetch`.

`fetch` makes ``<root>/<dataset>/`` hold the files of `gelujax.data.published.PUBLISHED`,
verified (`gelujax.data.checksums`), from each of `gelujax.data.published.locations` in turn.

* **Transfers that fail well.** A progress bar in bytes; a dropped connection, a timeout or an
  HTTP 5xx is retried with exponential backoff, resuming the partial file with an HTTP Range
  request where the server allows it. Bytes go to ``<file>.part``, renamed to the file's name
  only once its sha256 and size match the table, so an interrupted transfer (Ctrl-C, kill -9)
  never leaves a partial file under the final name, and the next fetch resumes it. A file
  whose checksum does not match is deleted and the message names the URL, the checksum
  expected and the one that came. One process fetches a data set at a time (an OS lock on
  ``<root>/<dataset>/.lock``); another waits for it, then finds the files there.
* **Archives** (CIFAR) are extracted member by member into a temporary folder, refusing any
  member outside the data set's folder, any link and any device, then renamed into place with
  a record of each extracted file's sha256 (`gelujax.data.checksums.MANIFEST`), checked at
  every load.

The command line that fetches ahead of time, ``python -m gelujax.data download NAME
[--data_dir DIR]``, is :mod:`gelujax.data.__main__`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import http.client
import json
import os
import shlex
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import tqdm

from gelujax.data.checksums import (
  CHUNK,
  MANIFEST,
  PART_SUFFIX,
  Entry,
  NotFound,
  file_problem,
  file_sha256,
  verified,
)
from gelujax.data.published import DATA_DIR_VARIABLE, PublishedFile, locations, lookup

LOCK_FILE = ".lock"
TIMEOUT_SECONDS = 60
ATTEMPTS = 4  # Failed attempts in a row (without new bytes) before a location is given up.
BACKOFF_SECONDS = 1.0  # The first retry's wait; each further one waits twice as long.


def fetch(dataset: str, root: Path, *, network: bool = True, progress: bool = True) -> Entry:
  """Makes ``root/<dataset>`` hold the data set's published files, verified; returns them.

  Files already there that verify are kept. With ``network`` False, only what is already
  there is used (an archive put there by hand is extracted).

  Raises:
    NotFound: a file could not be had (each location's reason in the message).
    ValueError: the cache folder cannot be written, or an archive holds a member it must not.
  """
  try:
    return verified(dataset, root)
  except NotFound as e:
    missing = e
  spec = lookup(dataset)
  folder = root / dataset
  archive_there = bool(spec.extracts_to) and (folder / spec.files[0].name).is_file()
  if not network and not archive_there:
    raise missing
  with _locked(folder, dataset):
    with contextlib.suppress(NotFound):  # Another process may have fetched it meanwhile.
      return verified(dataset, root)
    if network:
      print(f"gelujax: fetching {dataset} into {folder}.", file=sys.stderr, flush=True)
    for file in spec.files:
      path = folder / file.name
      problem = file_problem(path, file) if path.exists() else f"{file.name} not downloaded yet"
      if problem is None:
        continue
      if not network:
        raise NotFound(problem)
      if path.exists():
        print(f"gelujax: {problem}; downloading it again.", file=sys.stderr, flush=True)
        path.unlink()
      _download(dataset, file, path, progress)
    if spec.extracts_to:
      _extract(folder / spec.files[0].name, spec.files[0], folder, spec.extracts_to)
    return verified(dataset, root)


@contextlib.contextmanager
def _locked(folder: Path, dataset: str) -> Iterator[None]:
  """Holds ``folder``'s lock, waiting for another process that holds it (and saying so)."""
  try:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
  except IsADirectoryError:
    raise ValueError(
      f"{folder / LOCK_FILE}, the lock of the data cache {folder}, is a folder, not a file (made "
      f"by hand?): remove it (`rmdir {shlex.quote(str(folder / LOCK_FILE))}`, if empty) and re-run "
      "the same command."
    ) from None
  except OSError as e:
    raise ValueError(
      f"Cannot write the data cache {folder} ({e.strerror}): set {DATA_DIR_VARIABLE} (or pass "
      "`data_dir`) to a folder you can write."
    ) from None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "?"
      print(
        f"gelujax: waiting for process {holder}, which is fetching {dataset} into {folder}.",
        file=sys.stderr,
        flush=True,
      )
      fcntl.flock(fd, fcntl.LOCK_EX)
    with contextlib.suppress(OSError):  # Only words for the message above.
      os.ftruncate(fd, 0)
      os.pwrite(fd, f"{os.getpid()} on host {socket.gethostname()}\n".encode(), 0)
    yield
  finally:
    os.close(fd)  # Closing drops the lock.


# ------------------------------------------------------------------------- transfers


class _Failed(Exception):
  """One location failed for good (no retry); the message says why."""


class _Transient(Exception):
  """One attempt failed in a way worth retrying."""


def _download(dataset: str, file: PublishedFile, path: Path, progress: bool) -> None:
  """Downloads ``file`` to ``path`` from the first location that serves it intact."""
  part = path.with_name(path.name + PART_SUFFIX)
  failures = []
  for prefix in locations(dataset):
    url = prefix + file.name
    print(f"gelujax: downloading {url}", file=sys.stderr, flush=True)
    try:
      _transfer(url, part, file, progress)
    except _Failed as e:
      failures.append(f"{url}: {e}")
      continue
    digest, size, _ = file_sha256(part)
    if (digest, size) != (file.sha256, file.size):
      part.unlink()
      failure = (
        f"{url} served a file whose sha256 is {digest} ({size} bytes), not the published "
        f"{file.sha256} ({file.size} bytes); the file was deleted"
      )
      print(f"gelujax: {failure}.", file=sys.stderr, flush=True)
      failures.append(failure)
      continue
    os.replace(part, path)
    return
  raise NotFound(f"{file.name}: {'; '.join(failures)}")


def _transfer(url: str, part: Path, file: PublishedFile, progress: bool) -> None:
  """Brings ``part`` to ``file.size`` bytes from ``url``, resuming what it holds.

  Raises:
    _Failed: the location does not serve the file, or failed ``ATTEMPTS`` times in a row.
  """
  failures = 0
  while True:
    have = part.stat().st_size if part.exists() else 0
    if have > file.size:
      part.unlink()
      have = 0
    if have == file.size:
      return
    try:
      _attempt(url, part, have, file, progress)
      return
    except _Transient as e:
      grown = part.exists() and part.stat().st_size > have
      failures = 0 if grown else failures + 1  # Only attempts that brought nothing count.
      if failures >= ATTEMPTS:
        raise _Failed(f"{ATTEMPTS} attempts in a row brought nothing, the last: {e}") from None
      wait = BACKOFF_SECONDS * 2 ** max(failures - 1, 0)
      print(
        f"gelujax: {url}: {e}; retrying in {wait:g} s{' (resuming)' if grown or have else ''}.",
        file=sys.stderr,
        flush=True,
      )
      time.sleep(wait)


def _attempt(url: str, part: Path, have: int, file: PublishedFile, progress: bool) -> None:
  """One request: the rest of the file from byte ``have`` (or all of it) appended to ``part``."""
  headers = {"User-Agent": "gelujax", **({"Range": f"bytes={have}-"} if have else {})}
  try:
    response = urllib.request.urlopen(
      urllib.request.Request(url, headers=headers), timeout=TIMEOUT_SECONDS
    )
  except urllib.error.HTTPError as e:
    if e.code == 416 and have:  # The partial file is not a prefix the server knows: restart.
      part.unlink()
      raise _Transient("the server refused to resume the partial file") from None
    if e.code in (408, 429) or e.code >= 500:
      raise _Transient(f"HTTP {e.code} {e.reason}") from None
    raise _Failed(f"HTTP {e.code} {e.reason}") from None
  except urllib.error.URLError as e:
    if isinstance(e.reason, FileNotFoundError):  # A file:// mirror without the file.
      raise _Failed(f"no such file ({e.reason.filename})") from None
    if isinstance(e.reason, socket.gaierror | ConnectionRefusedError) or (
      isinstance(e.reason, OSError) and e.reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)
    ):
      raise _Failed(f"cannot connect ({e.reason}): no network, or no such host") from None
    if isinstance(e.reason, OSError):  # A timeout or a reset while connecting.
      raise _Transient(str(e.reason)) from None
    raise _Failed(str(e.reason)) from None
  except (TimeoutError, ConnectionError, http.client.HTTPException) as e:
    raise _Transient(f"{type(e).__name__}: {e}") from None
  with response:
    status = getattr(response, "status", None)
    resumed = have > 0 and status == 206
    content_range = response.headers.get("Content-Range") or ""
    if resumed and not content_range.startswith(f"bytes {have}-"):
      raise _Failed(f"answered a request for bytes {have}- with Content-Range {content_range!r}")
    start = have if resumed else 0
    length = response.headers.get("Content-Length")
    if length is not None and length.isdigit() and start + int(length) != file.size:
      raise _Failed(f"serves {start + int(length)} bytes; the published file has {file.size}")
    # One read call a chunk: what has arrived is written (and shown) without waiting for more.
    read = getattr(response, "read1", response.read)
    received = start
    try:
      out = part.open("ab" if resumed else "wb")
    except OSError as e:
      raise _disk_error(part, e) from None
    with (
      out,
      tqdm.tqdm(
        total=file.size,
        initial=start,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=file.name,
        disable=not progress,
        file=sys.stderr,
      ) as bar,
    ):
      while received < file.size:
        try:
          chunk = read(min(CHUNK, file.size - received + 1))
        except (OSError, http.client.HTTPException) as e:
          raise _Transient(f"{type(e).__name__} after {received} of {file.size} bytes") from None
        if not chunk:
          raise _Transient(f"the connection closed after {received} of {file.size} bytes")
        received += len(chunk)
        if received > file.size:
          raise _Failed(f"serves more than the {file.size} bytes of the published file")
        try:
          out.write(chunk)
          out.flush()  # On disk at once: a killed transfer resumes from all it received.
        except OSError as e:
          raise _disk_error(part, e) from None
        bar.update(len(chunk))
      try:
        os.fsync(out.fileno())
      except OSError as e:
        raise _disk_error(part, e) from None


def _disk_error(path: Path, error: OSError) -> ValueError:
  return ValueError(
    f"Cannot write {path} ({error.strerror}): free space there, or set {DATA_DIR_VARIABLE} (or "
    "`data_dir`) to another folder."
  )


# ----------------------------------------------------------------------- extraction


def _extract(archive: Path, file: PublishedFile, folder: Path, target: str) -> None:
  """Extracts ``archive`` into ``folder/target`` through a temporary folder, with `MANIFEST`.

  Raises:
    ValueError: a member outside ``target``, a link or a device (nothing is extracted).
  """
  for stale in folder.glob(".extracting-*"):  # Left by a process killed while extracting.
    shutil.rmtree(stale, ignore_errors=True)
  temporary = Path(tempfile.mkdtemp(prefix=".extracting-", dir=folder))
  try:
    files = {}
    with tarfile.open(archive, "r:*") as tar:
      for member in tar:
        parts = PurePosixPath(member.name).parts
        where = f"{archive}: member {member.name!r}"
        if member.name.startswith("/") or ".." in parts or not parts or parts[0] != target:
          raise ValueError(
            f"{where} lies outside the folder {target}/ that the data set extracts to; "
            "refused, nothing was extracted."
          )
        if not (member.isdir() or member.isfile()):
          raise ValueError(
            f"{where} is a {_member_kind(member)}; only files and folders are extracted, so "
            "it was refused and nothing was extracted."
          )
        path = temporary.joinpath(*parts)
        if member.isdir():
          path.mkdir(parents=True, exist_ok=True)
          continue
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with tar.extractfile(member) as source, path.open("wb") as out:
          while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
        files[str(PurePosixPath(*parts[1:]))] = [digest.hexdigest(), member.size]
    extracted = temporary / target
    if not files:
      raise ValueError(f"{archive}: holds no files under {target}/.")
    (extracted / MANIFEST).write_text(
      json.dumps(
        {
          "archive": {"name": file.name, "sha256": file.sha256, "size": file.size},
          "files": files,
        },
        indent=1,
      )
    )
    final = folder / target
    if final.exists():  # A damaged earlier extraction: swapped out, then removed with the rest.
      final.rename(temporary / "replaced")
    extracted.rename(final)
  except (tarfile.TarError, EOFError, OSError) as e:
    raise ValueError(f"{archive}: cannot be extracted ({e}).") from None
  finally:
    shutil.rmtree(temporary, ignore_errors=True)


def _member_kind(member: tarfile.TarInfo) -> str:
  if member.issym():
    return f"symbolic link (to {member.linkname!r})"
  if member.islnk():
    return f"hard link (to {member.linkname!r})"
  if member.ischr() or member.isblk():
    return "device"
  return "FIFO" if member.isfifo() else "special file"
