"""The paper's datasets as compact in-memory NumPy arrays, read locally first, else downloaded.

``load(name, data_dir=None, **options)`` returns a :class:`Splits`: a dict from split name
(``"train"``, ``"validation"``, ``"test"``) to a dict of arrays with at least ``"inputs"`` and
``"targets"``, plus an ``.info`` dict (``"num_classes"``, ``"source"``, ``"record"``, and per
dataset extras). ``info["record"]`` says where the data came from and what was verified:
``{"dataset", "source", "sha256": {file: digest}, "verified": sentence}`` (a run's config.json
keeps it; :func:`describe_record` is its log line).

Where a dataset is looked for, in order (the first that has it wins):

1. ``data_dir``, when given, and only it: its files, ``data_dir/<name>`` (and the official
   subfolder inside either, for CIFAR), and a TFDS copy in it. A ``data_dir`` that does not
   exist or does not hold the dataset is an error naming ``data_dir``.
2. For fashion_mnist, Debian's copy in ``/usr/share/datasets/fashion-mnist`` (package
   ``dataset-fashion-mnist``).
3. A TFDS copy in TFDS's default folder (MNIST, Fashion-MNIST, CIFAR).
4. The cache ``<root>/<name>/`` (root: ``$GELUJAX_DATA_DIR``, else
   ``~/.cache/gelujax/datasets``), verified file by file.
5. A download into the cache from ``$GELUJAX_DATA_MIRROR`` or the published locations
   (`gelujax.data.download`; never with ``GELUJAX_OFFLINE=1``, never for TIMIT).

Files read from 1 and 2 are compared with the published checksums and used as found; the
record says which match (Debian's Fashion-MNIST files do, once the gzip header its packager
re-wrote is put back).

Each format's reader is a module of its own, which documents its files and layout:
:mod:`gelujax.data.mnist` (IDX files: ``mnist``, ``fashion_mnist``), :mod:`gelujax.data.cifar`
(the python pickle batches), :mod:`gelujax.data.twitter` (ARK TweetNLP files: ``twitter_pos``)
and :mod:`gelujax.data.timit` (``.npz`` files, and the converter from the authors' h5 files).

A dataset found nowhere raises a one-paragraph ValueError naming every place looked and how to
get it (offline: the URLs, the checksums and the folder to put the files in); a malformed file
raises a ValueError naming the file (and the line, for text files).

``python -m gelujax.data download NAME [--data_dir DIR]`` fetches a dataset ahead of time and
``python -m gelujax.data list`` shows, for each data set, the source :func:`load` would read it
from, or every place it looked (:func:`describe_sources`: the loader itself, without the
network).
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax.data import checksums, download, published
from gelujax.registry import Registry

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
PAD_WORD = "</s>"
UNKNOWN_WORD = "UUUNKKK"
# The order of the authors' tag_to_number, so that class indices match their code.
TWITTER_TAGS = (
  "N", "O", "S", "^", "Z", "L", "M", "V", "A", "R", "!", "D", "P",
  "&", "T", "X", "Y", "#", "@", "~", "U", "E", "$", ",", "G",
)  # fmt: skip
TIMIT_FEATURES = 26
_FLOAT32_MAX = float(np.finfo(np.float32).max)
TIMIT_CLASSES = 39
TIMIT_CONTEXT = 5  # frames each side of the centre frame

DATASETS: Registry[Callable[..., Splits]] = Registry("dataset")


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


# A source that does not have the dataset says why by raising it (not an error by itself).
_Missing = checksums.NotFound

# What `load` was asked for, for the sources it looks in: whether a download may be tried, and
# the cache folder (None: `gelujax.data.published.cache_root`'s default).
_NETWORK: contextvars.ContextVar[bool] = contextvars.ContextVar("gelujax_data_network")
_CACHE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("gelujax_data_cache")


class NoSource(ValueError):
  """No source has the data set. ``reasons``: ``(place, why not)`` in the order looked."""

  def __init__(self, message: str, reasons: list[tuple[str, str]]):
    super().__init__(message)
    self.reasons = reasons


def _cache_root() -> Path:
  return published.cache_root(_CACHE.get(None))


def dataset_names() -> list[str]:
  """The names :func:`load` accepts."""
  return DATASETS.names()


def load(
  name: str,
  data_dir: str | Path | None = None,
  *,
  network: bool = True,
  cache: str | Path | None = None,
  **options: Any,
) -> Splits:
  """Loads dataset ``name`` from the first source that has it (see the module docstring).

  Args:
    name: one of :func:`dataset_names`.
    data_dir: a folder with the dataset's files (or, for TFDS datasets, TFDS's data_dir); when
      given, the only place looked.
    network: whether a data set found nowhere on the machine may be downloaded.
    cache: the download cache (default: ``$GELUJAX_DATA_DIR``, else
      ``~/.cache/gelujax/datasets``).
    **options: dataset options, e.g. ``train_on_all=True`` or ``embeddings="vectors.txt"``.

  Raises:
    NoSource: no source has the dataset (a ValueError naming every place looked).
    ValueError: unknown name or option, ``data_dir`` does not hold it, a download failed, or a
      malformed file.
  """
  loader = DATASETS.lookup(name)
  try:
    inspect.signature(loader).bind(data_dir, **options)
  except TypeError:
    valid = [p for p in inspect.signature(loader).parameters if p != "data_dir"]
    raise ValueError(
      f"Unknown option(s) {sorted(options)} for dataset {name!r}; its options are {valid}."
    ) from None
  network_token, cache_token = _NETWORK.set(network), _CACHE.set(Path(cache) if cache else None)
  try:
    # An empty string (a flag's default) means no data_dir, like None.
    return loader(Path(data_dir) if data_dir else None, **options)
  finally:
    _NETWORK.reset(network_token)
    _CACHE.reset(cache_token)


def found_here(
  names: Sequence[str], data_dir: str | Path | None = None, **options: Any
) -> dict[str, str]:
  """Of ``names``, the data sets :func:`load` reads without the network (from ``data_dir`` only,
  when given), each with its source: what a task that takes other data sets offers where its
  own is missing. Each one found is read whole."""
  found = {}
  for name in names:
    try:
      found[name] = load(name, data_dir, network=False, **options).info["source"]
    except ValueError:  # Not here, or not usable with these options: not offered.
      continue
  return found


def describe_sources(cache: str | Path | None = None) -> list[str]:
  """One line per data set: the source :func:`load` reads it from, with what was verified, or
  every place it looked and why each did not have it. It is :func:`load` itself, without the
  network (so the same search order and the same words); a data set found is read whole."""
  lines = []
  for name in dataset_names():
    try:
      record = load(name, network=False, cache=cache).info["record"]
    except NoSource as e:
      looked = "; ".join(f"{where} ({why})" for where, why in e.reasons)
      lines.append(f"{name:<14}missing   looked in: {looked}")
    except ValueError as e:
      lines.append(f"{name:<14}unusable  {' '.join(str(e).split())}")
    else:
      lines.append(f"{name:<14}found     {record['source']}; {record['verified']}")
  return lines


def describe_record(record: dict[str, Any]) -> str:
  """One line for a run's log: the data set, where it was read, what was verified, checksums."""
  sha256 = ", ".join(f"{name} {digest[:12]}" for name, digest in record["sha256"].items())
  return (
    f"data {record['dataset']}: {record['source']}; {record['verified']}"
    f"{f'; sha256 {sha256}' if sha256 else ''}."
  )


# A folder reader: folder -> (what the loader reads next, the source's description, the files).
_Reader = Callable[[Path], tuple[Any, str, Sequence[Path]]]


def _find(
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
    ValueError: no source has it, naming every place looked and ``how_to_get`` it.
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
    except _Missing as e:
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
      raise _Missing("not tried: the network was not asked for")
    if network and published.is_offline():
      value = os.environ[published.OFFLINE_VARIABLE]
      raise _Missing(f"not tried: {published.OFFLINE_VARIABLE}={value} forbids the network")
    try:
      entry = download.fetch(name, root, network=network)
    except _Missing as e:
      # A download tried next changes the folder: say when this was so.
      downloads = not network and _NETWORK.get(True) and not published.is_offline()
      raise _Missing(f"{e}, before the download" if downloads else str(e)) from None
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
  raise _Missing("not given")


def _find_files(folder: Path, names: Sequence[str], gzip_ok: bool) -> list[Path]:
  """Paths of all ``names`` in ``folder`` (``.gz`` preferred if allowed).

  Raises _Missing if none is there, ValueError if only some are (a half-copied dataset).
  """
  if not folder.is_dir():
    raise _Missing("no such folder")
  found, missing = [], []
  for n in names:
    options = [folder / f"{n}.gz", folder / n] if gzip_ok else [folder / n]
    path = next((p for p in options if p.is_file()), None)
    (found if path else missing).append(path or n)
  if not found:
    raise _Missing(f"none of {', '.join(names)}")
  if missing:
    raise ValueError(
      f"Folder {folder} holds part of a dataset: missing {', '.join(missing)} "
      f"(it needs all of {', '.join(names)}{', each gzipped or not' if gzip_ok else ''})."
    )
  return found


def _split_train(
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


def _check_labels(labels: np.ndarray, num_classes: int, where: str) -> np.ndarray:
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
    raise _Missing(f"tensorflow-datasets is not installed ({type(e).__name__}: {e})") from None

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
      raise _Missing("no prepared copy") from e
    raise _Missing(f"failed with {type(e).__name__}: {str(e)[:300]}") from e
  finally:
    absl_logger.setLevel(level)


_TFDS_UNVERIFIED = (
  "not verified: a copy TFDS prepared, which gelujax cannot check against the published files"
)
_TFDS_HOW = (
  "let TFDS prepare {name!r} in ArrayRecord format in `data_dir` or ~/tensorflow_datasets "
  "(online, with TensorFlow installed, e.g. `tfds build {name} --file_format=array_record "
  "--data_dir=DIR`; reading it back needs no TensorFlow)."
)


def _tfds_where(tfds_name: str, data_dir: Path | None) -> str:
  return f"TFDS {tfds_name!r} (data_dir {data_dir or 'TFDS default, ~/tensorflow_datasets'})"


# The readers register their loaders in DATASETS; they read this module's helpers, so they come
# last.
from gelujax.data import cifar, mnist, timit, twitter  # noqa: E402, F401
from gelujax.data.timit import convert_timit_h5  # noqa: E402, F401
