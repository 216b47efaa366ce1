"""Files on disk against the published checksums: the cache's, and copies found elsewhere.

* **The cache.** `verified` checks a data set's files under the cache root
  (`gelujax.data.published.cache_root`) against the table, touching nothing; a file missing,
  part-downloaded or damaged raises `NotFound`, which says which. An archive's (CIFAR's)
  extracted files are checked against the sha256 of each, recorded when gelujax extracted them
  (`MANIFEST`).
* **Local copies.** `check_local` compares files found elsewhere (a ``data_dir``, Debian's
  Fashion-MNIST) with the table and records what each matches. Debian's build rewrote the gzip
  headers of its Fashion-MNIST files (the file name dropped, the time set) and left the
  compressed data as published: the table keeps each published header's time (``gzip_mtime``),
  so the published file's sha256 can be checked from Debian's bytes with the published header
  put back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax.data.published import PUBLISHED, Published, PublishedFile, lookup

PART_SUFFIX = ".part"  # A file being downloaded, renamed to its name once verified.
MANIFEST = ".sha256.json"  # In an extracted folder: the archive and each file's sha256.
CHUNK = 1 << 20  # Bytes read (and written) at a time.


class NotFound(Exception):
  """A source does not have the data set; the message says why (not an error by itself)."""


@dataclasses.dataclass(frozen=True)
class Entry:
  """A data set's verified files: the ``folder`` its loader reads, and the ``record`` of what
  was checked (``sha256``: file name -> hex digest; ``verified``: one sentence)."""

  folder: Path
  record: dict[str, Any]


def file_sha256(path: Path, header: bytes | None = None) -> tuple[str, int, str | None]:
  """The sha256 and size of ``path``, and, when ``header`` is given, the sha256 of the file
  with its 10-byte gzip header replaced by ``header`` (one read for both)."""
  digest, restored = hashlib.sha256(), hashlib.sha256() if header is not None else None
  size = 0
  with path.open("rb") as f:
    first = True
    while chunk := f.read(CHUNK):
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


def verified(dataset: str, root: Path) -> Entry:
  """The cached files of ``dataset`` under ``root``, each checked against the table (an
  archive's extracted files against the sha256 recorded when they were extracted).

  Touches nothing and never the network.

  Raises:
    NotFound: a file is missing or does not match (the message says which).
  """
  spec = lookup(dataset)
  folder = root / dataset
  if not folder.is_dir():
    raise NotFound("no such folder")
  if spec.extracts_to:
    return _verified_extraction(spec, folder)
  sha256 = {}
  for file in spec.files:
    problem = file_problem(folder / file.name, file)
    if problem:
      raise NotFound(problem)
    sha256[file.name] = file.sha256
  verified = (
    f"each of the {len(sha256)} files matches its published sha256 and size (checked at this load)"
  )
  return Entry(folder, {"sha256": sha256, "verified": verified})


def file_problem(path: Path, file: PublishedFile) -> str | None:
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
