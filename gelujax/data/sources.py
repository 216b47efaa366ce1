"""What every reader of :mod:`gelujax.data` shares: the :class:`Splits` they return, the
:data:`DATASETS` registry they enter their loaders in, :func:`find`, the search for a data set's
files in the order :mod:`gelujax.data` states (its folders, Debian's copy, TFDS, the cache, a
download), and the checks and splits of what they read (:func:`find_files`,
:func:`check_labels`, :func:`split_train`).

A source that does not have a data set says why by raising
:class:`gelujax.data.checksums.NotFound` (not an error by itself: the search goes on); a search
that finds it nowhere raises :class:`NoSource`. :func:`gelujax.data.load` says what it was asked
for (may the network be used, which cache) with :func:`searching`, which :func:`find` reads.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.data import checksums, download, published
from gelujax.data.checksums import NotFound
from gelujax.registry import Registry


class Splits(dict):
  """Split name -> dict of arrays, with dataset-level facts in ``.info``."""

  def __init__(self, splits: dict[str, dict[str, np.ndarray]], info: dict[str, Any]):
    super().__init__(splits)
    self.info = info

  def __repr__(self) -> str:
    """The data set's name, the keys of ``info``, and a line per split (train, validation, test,
    then any other): its examples, and each array's dtype and shape (never the values)."""
    name = (self.info.get("record") or {}).get("dataset")
    lines = [f"Splits{f' {name!r}' if name else ''} (info: {', '.join(self.info) or 'none'}):"]
    width = max(map(len, self), default=0)
    order = ("train", "validation", "test")
    for split in sorted(self, key=lambda s: (order.index(s) if s in order else len(order), s)):
      arrays = self[split]
      sized = [
        a for a in (arrays.get("targets"), *arrays.values()) if hasattr(a, "shape") and a.ndim
      ]
      examples = len(sized[0]) if sized else "?"
      described = ", ".join(
        f"{key} {a.dtype} {a.shape}" if hasattr(a, "shape") else f"{key} {type(a).__name__}"
        for key, a in arrays.items()
      )
      lines.append(f"  {split:<{width}}  {examples} examples: {described}")
    return "\n".join(lines)


DATASETS: Registry[Callable[..., Splits]] = Registry("dataset")


class NoSource(ValueError):
  """No source has the data set. ``reasons``: ``(place, why not)`` in the order looked."""

  def __init__(self, message: str, reasons: list[tuple[str, str]]):
    super().__init__(message)
    self.reasons = reasons


# What `load` was asked for, for the sources `find` looks in: whether a download may be tried,
# and the cache folder (None: `gelujax.data.published.cache_root`'s default).
_NETWORK: contextvars.ContextVar[bool] = contextvars.ContextVar("gelujax_data_network")
_CACHE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("gelujax_data_cache")


@contextlib.contextmanager
def searching(*, network: bool, cache: Path | None) -> Iterator[None]:
  """Within it, :func:`find` downloads only where ``network`` is true, and uses ``cache`` as the
  download cache (None: `gelujax.data.published.cache_root`'s default)."""
  network_token, cache_token = _NETWORK.set(network), _CACHE.set(cache)
  try:
    yield
  finally:
    _NETWORK.reset(network_token)
    _CACHE.reset(cache_token)


def _cache_root() -> Path:
  return published.cache_root(_CACHE.get(None))


# A folder reader: folder -> (what the loader reads next, the source's description, the files).
_Reader = Callable[[Path], tuple[Any, str, Sequence[Path]]]


def find(
  name: str,
  data_dir: Path | None,
  read: _Reader,
  how_to_get: str,
  *,
  subfolder: str | None = None,
  debian: Path | None = None,
  tfds: bool = False,
) -> tuple[Any, dict[str, Any]]:
  """``(what read returned, the source's record)`` from the first source that has ``name``.

  With ``data_dir``, only it is looked in (its files, ``data_dir/<name>`` and ``subfolder``
  inside either, and a TFDS copy in it): a folder that does not exist or does not hold the
  data set is an error naming ``data_dir``. Without it, in order: ``debian``, a TFDS copy
  in TFDS's default folder, the cache, then a download (`gelujax.data.download`).

  Raises:
    NoSource: no source has it (a ValueError naming every place looked and ``how_to_get`` it).
    ValueError: ``data_dir`` is not a folder.
  """

  def from_tfds(tfds_dir: Path | None) -> tuple[Any, dict[str, Any]]:
    where = _tfds_where(name, tfds_dir)
    record = {"dataset": name, "source": where, "sha256": {}, "verified": _TFDS_UNVERIFIED}
    return _read_tfds(name, tfds_dir, "label"), record

  if data_dir is not None:
    folders = [data_dir, data_dir / name]
    if subfolder:
      folders = [f for d in folders for f in (d / subfolder, d)]
    sources = [(f"data_dir {d}", lambda d=d: _read_local(name, read, d)) for d in folders]
    if tfds:
      sources.append((_tfds_where(name, data_dir), lambda: from_tfds(data_dir)))
    if not data_dir.is_dir():
      raise ValueError(
        f"`data_dir` {data_dir} does not exist or is not a folder; pass the folder that holds "
        f"{name!r}, or {_without_data_dir(name, data_dir, debian, tfds)}"
      )
    problem = f"`data_dir` {data_dir} does not hold it"
    how_to_get = f"{how_to_get} Or {_without_data_dir(name, data_dir, debian, tfds)}"
  else:
    sources = [("`data_dir`", _raise_not_given)]
    if debian is not None:
      sources.append(
        (f"{debian} (Debian package dataset-fashion-mnist)",
         lambda: _read_local(name, read, debian))
      )  # fmt: skip
    if tfds:
      sources.append((_tfds_where(name, None), lambda: from_tfds(None)))
    sources.extend(_cache_sources(name, read))
    problem = "no source has it"
    if name in published.PUBLISHED:
      how_to_get = f"{how_to_get} {published.where_to_put(name, _cache_root())}"
  reasons = []
  for where, get in sources:
    try:
      return get()
    except NotFound as e:
      reasons.append((where, str(e)))
  looked = "; ".join(f"{where} ({why})" for where, why in reasons)
  raise NoSource(
    f"Cannot load dataset {name!r}: {problem}. Looked in: {looked}. {how_to_get}", reasons
  )


def _cache_sources(name: str, read: _Reader) -> list[tuple[str, Callable[[], Any]]]:
  """The cache under `gelujax.data.published.cache_root`, then a download into it (never for
  TIMIT, whose folder there is only looked in)."""
  root = _cache_root()

  def cached(network: bool) -> tuple[Any, dict[str, Any]]:
    if network and not _NETWORK.get(True):
      raise NotFound("not tried: the network was not asked for")
    if network and published.is_offline():
      value = os.environ[published.OFFLINE_VARIABLE]
      raise NotFound(f"not tried: {published.OFFLINE_VARIABLE}={value} forbids the network")
    try:
      entry = download.fetch(name, root, network=network)
    except NotFound as e:
      # A download tried next changes the folder: say when this was so.
      downloads = not network and _NETWORK.get(True) and not published.is_offline()
      raise NotFound(f"{e}, before the download" if downloads else str(e)) from None
    value, source, _ = read(entry.folder)
    return value, {"dataset": name, "source": source, **entry.record}

  if name not in published.PUBLISHED:
    return [(f"the cache {root / name}", lambda: _read_local(name, read, root / name))]
  return [
    (f"the cache {root / name}", lambda: cached(network=False)),
    (f"a download from {' or '.join(published.locations(name))}", lambda: cached(network=True)),
  ]


def _read_local(name: str, read: _Reader, folder: Path) -> tuple[Any, dict[str, Any]]:
  """``read(folder)`` and the record of the files it read, checked against the published ones."""
  value, source, paths = read(folder)
  return value, {"dataset": name, "source": source, **checksums.check_local(name, paths)}


def _without_data_dir(name: str, data_dir: Path, debian: Path | None, tfds: bool) -> str:
  """The end of a sentence: what leaving ``data_dir`` out would do, or fetching into it."""
  cache = _cache_root() / name
  if name not in published.PUBLISHED:
    return f"leave `data_dir` out to look in the cache {cache}."
  local = [
    *([f"Debian's copy in {debian} (apt-get install dataset-fashion-mnist)"] if debian else []),
    *(["a TFDS copy"] if tfds else []),
    f"the cache {cache} (downloaded there on first use)",
  ]
  return (
    f"leave `data_dir` out to use {', '.join(local[:-1])}{' or ' if len(local) > 1 else ''}"
    f"{local[-1]}, or download it into `data_dir` with `python -m gelujax.data download {name} "
    f"--data_dir {data_dir}`."
  )


def _raise_not_given():
  raise NotFound("not given")


def find_files(folder: Path, names: Sequence[str], gzip_ok: bool) -> list[Path]:
  """Paths of all ``names`` in ``folder`` (``.gz`` preferred if allowed).

  Raises NotFound if none is there, ValueError if only some are (a half-copied dataset).
  """
  if not folder.is_dir():
    raise NotFound("no such folder")
  found, missing = [], []
  for n in names:
    options = [folder / f"{n}.gz", folder / n] if gzip_ok else [folder / n]
    path = next((p for p in options if p.is_file()), None)
    (found if path else missing).append(path or n)
  if not found:
    raise NotFound(f"none of {', '.join(names)}")
  if missing:
    raise ValueError(
      f"Folder {folder} holds part of a dataset: missing {', '.join(missing)} "
      f"(it needs all of {', '.join(names)}{', each gzipped or not' if gzip_ok else ''})."
    )
  return found


def split_train(
  train: tuple[np.ndarray, np.ndarray],
  test: tuple[np.ndarray, np.ndarray],
  train_on_all: bool,
  validation_size: int,
  info: dict[str, Any],
) -> Splits:
  """Validation = the first ``validation_size`` train examples, unless ``train_on_all``."""
  (x, y), (x_test, y_test) = train, test
  splits = {"test": {"inputs": x_test, "targets": y_test}}
  if train_on_all:
    splits["train"] = {"inputs": x, "targets": y}
  else:
    if not 0 < validation_size < len(x):
      raise ValueError(
        f"validation_size={validation_size} is invalid: it must be between 1 and "
        f"{len(x) - 1} (the train file has {len(x)} examples)."
      )
    splits["train"] = {"inputs": x[validation_size:], "targets": y[validation_size:]}
    splits["validation"] = {"inputs": x[:validation_size], "targets": y[:validation_size]}
  return Splits(splits, info)


def check_labels(labels: np.ndarray, num_classes: int, where: str) -> np.ndarray:
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    raise ValueError(
      f"{where}: labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}."
    )
  return labels.astype(np.int32)


# ----------------------------------------------------------------------------- TFDS


def _read_tfds(tfds_name: str, data_dir: Path | None, label_key: str):
  """(train, test) as (images, labels) pairs from ``tfds.data_source``, reading a copy TFDS
  prepared before (never downloading: preparing these image sets needs TensorFlow)."""
  try:
    import tensorflow_datasets as tfds  # Heavy, only needed when local files are missing.
  except ImportError as e:  # An environment without it (a GPU image): this source is absent.
    raise NotFound(f"tensorflow-datasets is not installed ({type(e).__name__}: {e})") from None

  def read_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    source = tfds.data_source(
      tfds_name, split=split, data_dir=None if data_dir is None else str(data_dir), download=False
    )
    first = source[0]["image"]
    images = np.empty((len(source), *first.shape), np.uint8)
    labels = np.empty(len(source), np.int32)
    for i in range(len(source)):
      example = source[i]
      images[i], labels[i] = example["image"], example[label_key]
    return images, labels

  absl_logger = logging.getLogger("absl")  # TFDS warns about the folders it looks in.
  level = absl_logger.level
  absl_logger.setLevel(logging.ERROR)
  try:
    return read_split("train"), read_split("test")
  except Exception as e:  # Any TFDS failure means this source is unavailable; report why.
    try:
      prepared = tfds.builder(tfds_name, data_dir=None if data_dir is None else str(data_dir))
      prepared = prepared.is_prepared()
    except Exception:  # TFDS cannot even say: report its first failure.
      prepared = True
    if not prepared:
      raise NotFound("no prepared copy") from e
    raise NotFound(f"failed with {type(e).__name__}: {str(e)[:300]}") from e
  finally:
    absl_logger.setLevel(level)


_TFDS_UNVERIFIED = (
  "not verified: a copy TFDS prepared, which gelujax cannot check against the published files"
)
TFDS_HOW = (
  "let TFDS prepare {name!r} in ArrayRecord format in `data_dir` or ~/tensorflow_datasets "
  "(online, with TensorFlow installed, e.g. `tfds build {name} --file_format=array_record "
  "--data_dir=DIR`; reading it back needs no TensorFlow)."
)


def _tfds_where(tfds_name: str, data_dir: Path | None) -> str:
  return f"TFDS {tfds_name!r} (data_dir {data_dir or 'TFDS default, ~/tensorflow_datasets'})"
