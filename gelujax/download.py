"""The published data files: where they are, their checksums, and fetching them on first use.

`PUBLISHED` is the one table of every data set gelujax downloads: each file's published name,
sha256 and size, and the URL prefixes that publish it. `fetch` makes ``<root>/<dataset>/``
hold those files, verified, where ``root`` is `cache_root`: ``--data_dir`` when the
``download`` command is given one, else ``$GELUJAX_DATA_DIR``, else ``~/.cache/gelujax/datasets``.

* **Where from.** ``$GELUJAX_DATA_MIRROR/<dataset>/<file>`` first (a lab's mirror, under the
  same checksums; ``http://``, ``https://`` or ``file://``), then each published location in
  turn. ``GELUJAX_OFFLINE=1`` never touches the network.
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
  a record of each extracted file's sha256 (`MANIFEST`), checked at every load.
* **Local copies.** `check_local` compares files found elsewhere (``--data_dir``, Debian's
  Fashion-MNIST) with the table. Debian's build rewrote the gzip headers of its Fashion-MNIST
  files (the file name dropped, the time set) and left the compressed data as published: the
  table keeps each published header's time (``gzip_mtime``), so the published file's sha256
  can be checked from Debian's bytes with the published header put back.

TIMIT is licensed by the LDC and is never downloaded.

The command line that fetches ahead of time, ``python -m gelujax.data download NAME
[--data_dir DIR]``, is :mod:`gelujax.data.__main__`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import socket
import struct
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import tqdm

from gelujax.registry import close_names, did_you_mean, sentences

DATA_DIR_VARIABLE = "GELUJAX_DATA_DIR"
MIRROR_VARIABLE = "GELUJAX_DATA_MIRROR"
OFFLINE_VARIABLE = "GELUJAX_OFFLINE"
DEFAULT_CACHE = Path("~/.cache/gelujax/datasets")
LOCK_FILE = ".lock"
PART_SUFFIX = ".part"
MANIFEST = ".sha256.json"  # In an extracted folder: the archive and each file's sha256.
TIMEOUT_SECONDS = 60
ATTEMPTS = 4  # Failed attempts in a row (without new bytes) before a location is given up.
BACKOFF_SECONDS = 1.0  # The first retry's wait; each further one waits twice as long.
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class PublishedFile:
  """One published file.

  ``gzip_mtime``: for a gzip file a packager is known to re-write the header of (its file name
  dropped, its time set), the published header's time, so that the published file's checksum
  can be checked from the packaged copy (see `check_local`).
  """

  name: str
  sha256: str
  size: int
  gzip_mtime: int | None = None


@dataclasses.dataclass(frozen=True)
class Published:
  """A data set's published files and where they are.

  ``locations``: URL prefixes, tried in order; a file's URL is the prefix and its name.
  ``extracts_to``: for an archive, the one folder all its members lie in, which is what the
  data set's loader reads.
  """

  files: tuple[PublishedFile, ...]
  locations: tuple[str, ...]
  extracts_to: str | None = None


_MNIST_NAMES = (
  "train-images-idx3-ubyte.gz",
  "train-labels-idx1-ubyte.gz",
  "t10k-images-idx3-ubyte.gz",
  "t10k-labels-idx1-ubyte.gz",
)
_ARK = (
  "https://raw.githubusercontent.com/brendano/ark-tweet-nlp/"
  "37b10b3a0ff0d6ab2c7c0a5cb05eac8f02f11be4/data/twpos-data-v0.3/oct27.splits/"
)

# The checksums and sizes published with each file (TFDS's url_checksums for the MNIST sets),
# the sizes of the Twitter files measured on copies whose sha256 matches, and the published
# gzip header times of Fashion-MNIST found by `python scripts/find_gzip_mtime.py`.
PUBLISHED: dict[str, Published] = {
  "mnist": Published(
    files=tuple(
      PublishedFile(name, sha256, size)
      for name, sha256, size in zip(
        _MNIST_NAMES,
        (
          "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
          "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
          "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
          "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        ),
        (9912422, 28881, 1648877, 4542),
        strict=True,
      )
    ),
    locations=(
      "https://storage.googleapis.com/cvdf-datasets/mnist/",
      "https://ossci-datasets.s3.amazonaws.com/mnist/",
    ),
  ),
  "fashion_mnist": Published(
    files=tuple(
      PublishedFile(name, sha256, size, mtime)
      for name, sha256, size, mtime in zip(
        _MNIST_NAMES,
        (
          "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
          "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
          "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
          "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        ),
        (26421880, 29515, 4422102, 5148),
        (1504176606, 1504176606, 1504176627, 1504176627),
        strict=True,
      )
    ),
    locations=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
  ),
  "cifar10": Published(
    files=(
      PublishedFile(
        "cifar-10-python.tar.gz",
        "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        170498071,
      ),
    ),
    locations=("https://www.cs.toronto.edu/~kriz/",),
    extracts_to="cifar-10-batches-py",
  ),
  "cifar100": Published(
    files=(
      PublishedFile(
        "cifar-100-python.tar.gz",
        "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
        169001437,
      ),
    ),
    locations=("https://www.cs.toronto.edu/~kriz/",),
    extracts_to="cifar-100-python",
  ),
  "twitter_pos": Published(
    files=(
      PublishedFile(
        "oct27.train", "e55a63da62838a28b308bd1be0b5c903ac242ef208dc59838f4b39aa33b11948", 110737
      ),
      PublishedFile(
        "oct27.dev", "046e9c57ed2549b4dec08a9a7bccf8ec7f742faaa7b55d840408f2dfd1356851", 36996
      ),
      PublishedFile(
        "oct27.test", "77f868fcd300d0acdd7bb8db28c961fcbe50d9cd0d48046e8fbec4b9f86bf814", 53792
      ),
    ),
    locations=(_ARK,),
  ),
}


class NotFound(Exception):
  """A source does not have the data set; the message says why (not an error by itself)."""


@dataclasses.dataclass(frozen=True)
class Entry:
  """A data set's verified files: the ``folder`` its loader reads, and the ``record`` of what
  was checked (``sha256``: file name -> hex digest; ``verified``: one sentence)."""

  folder: Path
  record: dict[str, Any]


# ------------------------------------------------------------------------- settings


def cache_root(data_dir: str | Path | None = None) -> Path:
  """Where downloads go: ``data_dir``, else ``$GELUJAX_DATA_DIR``, else
  ``~/.cache/gelujax/datasets``."""
  return Path(data_dir or os.environ.get(DATA_DIR_VARIABLE) or DEFAULT_CACHE).expanduser()


def is_offline() -> bool:
  """Whether ``$GELUJAX_OFFLINE`` forbids the network (any value but empty, 0, false, no)."""
  return os.environ.get(OFFLINE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def mirror_prefix(dataset: str) -> str | None:
  """``$GELUJAX_DATA_MIRROR/<dataset>/``, or None when the variable is unset.

  Raises:
    ValueError: the variable is not a URL.
  """
  mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
  if not mirror:
    return None
  if not mirror.startswith(("http://", "https://", "file://")):
    raise ValueError(
      f"{MIRROR_VARIABLE}={mirror!r} is not a URL: it must start with http://, https:// or "
      f"file:// and hold the files at <prefix>/<data set>/<file>, e.g. "
      f"<prefix>/twitter_pos/oct27.train."
    )
  return f"{mirror.rstrip('/')}/{dataset}/"


def published(dataset: str) -> Published:
  """The table's entry for ``dataset``.

  Raises:
    ValueError: gelujax does not download it (TIMIT, or an unknown name).
  """
  if dataset == "timit":
    raise ValueError(
      "TIMIT is licensed by the LDC (catalog LDC93S1) and is never downloaded: obtain it from "
      "the LDC, convert the authors' h5 files with gelujax.data.convert_timit_h5, and pass "
      "--data_dir pointing at the folder holding train.npz, validation.npz and test.npz."
    )
  if dataset not in PUBLISHED:
    raise ValueError(
      sentences(
        f"No published files for data set {dataset!r}.",
        did_you_mean(close_names(dataset, PUBLISHED)),
        f"gelujax downloads {', '.join(PUBLISHED)}.",
      )
    )
  return PUBLISHED[dataset]


def locations(dataset: str) -> list[str]:
  """The URL prefixes tried for ``dataset``, in order: the mirror, then the published ones."""
  mirror = mirror_prefix(dataset)
  return [*([mirror] if mirror else []), *published(dataset).locations]


def where_to_put(dataset: str, root: Path) -> str:
  """The sentences of an error that say how to get ``dataset`` into the cache by hand."""
  spec = published(dataset)
  files = ", ".join(f"{f.name} (sha256 {f.sha256}, {f.size} bytes)" for f in spec.files)
  urls = " or ".join(locations(dataset))
  return (
    f"Offline or without a network, put the published files in {root / dataset}/ ({files}; "
    f"from {urls}), or fetch them ahead on a machine with a network with `python -m "
    f"gelujax.data download {dataset} --data_dir DIR` and copy DIR/{dataset}/ there (or set "
    f"{DATA_DIR_VARIABLE}=DIR); a mirror of <prefix>/{dataset}/<file> is used first when "
    f"{MIRROR_VARIABLE}=<prefix> is set."
  )


# ------------------------------------------------------------------------ checksums


def file_sha256(path: Path, header: bytes | None = None) -> tuple[str, int, str | None]:
  """The sha256 and size of ``path``, and, when ``header`` is given, the sha256 of the file
  with its 10-byte gzip header replaced by ``header`` (one read for both)."""
  digest, restored = hashlib.sha256(), hashlib.sha256() if header is not None else None
  size = 0
  with path.open("rb") as f:
    first = True
    while chunk := f.read(_CHUNK):
      digest.update(chunk)
      if restored is not None:
        restored.update(header + chunk[10:] if first else chunk)
      size += len(chunk)
      first = False
  return digest.hexdigest(), size, restored.hexdigest() if restored is not None else None


def published_gzip_header(file: PublishedFile) -> bytes:
  """The published gzip header of ``file``: deflate, the FNAME flag, its time, no extra flags,
  Unix, then its name less ``.gz``."""
  name = file.name.removesuffix(".gz").encode() + b"\0"
  return b"\x1f\x8b\x08\x08" + struct.pack("<I", file.gzip_mtime) + b"\x00\x03" + name


def check_local(dataset: str, paths: Sequence[Path]) -> dict[str, Any]:
  """The record of files found outside the cache: each one's sha256 and what it matches.

  A file matches when it has a published name, size and sha256; a gzip file whose header a
  packager re-wrote (a table entry with ``gzip_mtime``, and a header of no optional fields)
  when it does with the published header put back; a file gelujax extracted from a published
  archive when it matches the `MANIFEST` written then. A file that matches nothing is still
  used, as found; the record says so.
  """
  table = {f.name: f for f in PUBLISHED[dataset].files} if dataset in PUBLISHED else {}
  sha256: dict[str, str] = {}
  kinds: dict[str, list[str]] = {kind: [] for kind in _CHECK_SENTENCES}
  for path in paths:
    file = table.get(path.name)
    header = None
    if file is not None and file.gzip_mtime is not None:
      with path.open("rb") as f:
        start = f.read(10)
      if len(start) == 10 and start[:4] == b"\x1f\x8b\x08\x00":
        header = published_gzip_header(file)
    digest, size, digest_restored = file_sha256(path, header)
    sha256[path.name] = digest
    if file is not None and (digest, size) == (file.sha256, file.size):
      kind = "published"
    elif file is not None and digest_restored == file.sha256:
      kind = "restored"
    elif _extracted_as(dataset, path) == [digest, size]:
      kind = "extracted"
    else:
      kind = "differs" if file is not None else "unknown"
    kinds[kind].append(path.name)
  if not table:
    return {"sha256": sha256, "verified": "not verified: no published checksums (used as found)"}
  sentences = []
  for kind, names in kinds.items():
    if names:
      subject = (
        ("the file" if len(names) == 1 else f"each of the {len(names)} files")
        if len(names) == len(paths)
        else ", ".join(names)
      )
      singular = len(names) == 1 or len(names) == len(paths)
      sentences.append(_CHECK_SENTENCES[kind][not singular].format(subject))
  return {"sha256": sha256, "verified": "; ".join(sentences)}


# What `check_local` says of the files of each kind: (one file or each file, several by name).
_CHECK_SENTENCES = {
  "published": (
    "{} matches its published sha256 and size",
    "{} match their published sha256 and size",
  ),
  "restored": (
    "{} is the published file with its gzip header re-written by a packager (file name "
    "dropped, time set): with the published header put back, its sha256 and size match",
    "{} are the published files with their gzip headers re-written by a packager (file name "
    "dropped, time set): with the published headers put back, their sha256 and size match",
  ),
  "extracted": (
    "{} matches the sha256 recorded when gelujax extracted it from the published archive",
    "{} match the sha256 recorded when gelujax extracted them from the published archive",
  ),
  "differs": (
    "NOT VERIFIED: {} differs from the published file of that name (used as found)",
    "NOT VERIFIED: {} differ from the published files of those names (used as found)",
  ),
  "unknown": (
    "not verified: {} has no published checksum (only the files as published, gzipped or "
    "archived, have one; used as found)",
    "not verified: {} have no published checksum (only the files as published, gzipped or "
    "archived, have one; used as found)",
  ),
}


def _extracted_as(dataset: str, path: Path) -> list | None:
  """``[sha256, size]`` that the `MANIFEST` beside ``path`` recorded for it when gelujax
  extracted it from the data set's published archive (None without such a record)."""
  spec = PUBLISHED.get(dataset)
  if spec is None or spec.extracts_to is None:
    return None
  try:
    manifest = json.loads((path.parent / MANIFEST).read_text())
    (archive,) = spec.files
    if manifest["archive"] != {
      "name": archive.name,
      "sha256": archive.sha256,
      "size": archive.size,
    }:
      return None
    return manifest["files"].get(path.name)
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return None


# ---------------------------------------------------------------------------- cache


def verified(dataset: str, root: Path) -> Entry:
  """The cached files of ``dataset`` under ``root``, each checked against the table (an
  archive's extracted files against the sha256 recorded when they were extracted).

  Touches nothing and never the network.

  Raises:
    NotFound: a file is missing or does not match (the message says which).
  """
  spec = published(dataset)
  folder = root / dataset
  if not folder.is_dir():
    raise NotFound("no such folder")
  if spec.extracts_to:
    return _verified_extraction(spec, folder)
  sha256 = {}
  for file in spec.files:
    problem = _problem(folder / file.name, file)
    if problem:
      raise NotFound(problem)
    sha256[file.name] = file.sha256
  verified = (
    f"each of the {len(sha256)} files matches its published sha256 and size (checked at this load)"
  )
  return Entry(folder, {"sha256": sha256, "verified": verified})


def _problem(path: Path, file: PublishedFile) -> str | None:
  """Why ``path`` is not the published ``file`` (None when it is)."""
  if not path.is_file():
    part = path.with_name(path.name + PART_SUFFIX)
    if part.is_file():
      return f"{file.name} not downloaded yet ({part.stat().st_size} of {file.size} bytes)"
    return f"{file.name} not downloaded yet"
  digest, size, _ = file_sha256(path)
  if (digest, size) != (file.sha256, file.size):
    return (
      f"{path} is damaged: sha256 {digest}, {size} bytes; expected the published {file.sha256}, "
      f"{file.size} bytes"
    )
  return None


def _verified_extraction(spec: Published, folder: Path) -> Entry:
  (archive,) = spec.files
  target = folder / spec.extracts_to
  manifest_path = target / MANIFEST
  try:
    manifest = json.loads(manifest_path.read_text())
    recorded = manifest["archive"]
    files = manifest["files"]
  except FileNotFoundError:
    raise NotFound(f"{archive.name} not downloaded and extracted yet") from None
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise NotFound(f"{manifest_path} is damaged ({e})") from None
  if recorded != {"name": archive.name, "sha256": archive.sha256, "size": archive.size}:
    raise NotFound(f"{target} was extracted from another archive ({recorded})")
  for name, (sha256, size) in files.items():
    path = target / name
    if not path.is_file():
      raise NotFound(f"{path} is missing")
    digest, actual, _ = file_sha256(path)
    if (digest, actual) != (sha256, size):
      raise NotFound(
        f"{path} is damaged: sha256 {digest}, {actual} bytes; it was {sha256}, {size} bytes "
        f"when extracted from {archive.name}"
      )
  record = {
    "sha256": {archive.name: archive.sha256, **{name: v[0] for name, v in files.items()}},
    "verified": (
      f"{archive.name} matched its published sha256 and size when it was downloaded and "
      f"extracted; each of its {len(files)} extracted files matches the sha256 recorded then "
      "(checked at this load)"
    ),
  }
  return Entry(target, record)


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
  spec = published(dataset)
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
      problem = _problem(path, file) if path.exists() else f"{file.name} not downloaded yet"
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
  except OSError as e:
    raise ValueError(
      f"Cannot write the data cache {folder} ({e.strerror}): set {DATA_DIR_VARIABLE} (or pass "
      "--data_dir) to a folder you can write."
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
          chunk = read(min(_CHUNK, file.size - received + 1))
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
    "--data_dir) to another folder."
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
          while chunk := source.read(_CHUNK):
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
