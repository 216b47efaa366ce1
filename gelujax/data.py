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
   exist or does not hold the dataset is an error naming ``--data_dir``.
2. For fashion_mnist, Debian's copy in ``/usr/share/datasets/fashion-mnist`` (package
   ``dataset-fashion-mnist``).
3. A TFDS copy in TFDS's default folder (MNIST, Fashion-MNIST, CIFAR).
4. The cache ``<root>/<name>/`` (root: ``$GELUJAX_DATA_DIR``, else
   ``~/.cache/gelujax/datasets``), verified file by file.
5. A download into the cache from ``$GELUJAX_DATA_MIRROR`` or the published locations
   (`gelujax.download`; never with ``GELUJAX_OFFLINE=1``, never for TIMIT).

Files read from 1 and 2 are compared with the published checksums and used as found; the
record says which match (Debian's Fashion-MNIST files do, once the gzip header its packager
re-wrote is put back).

Datasets, layouts and their files:

* ``mnist``, ``fashion_mnist``: inputs uint8 ``[N, 28, 28, 1]``, targets int32. Splits: train
  55,000 / validation 5,000 (the FIRST 5,000 of the train file) / test 10,000. Options
  ``train_on_all=True`` (train = all 60,000, no validation split; the autoencoder) and
  ``validation_size`` (default 5,000). Files: ``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
  gzipped (``.gz``) or not. TFDS: ``tfds.data_source(name, data_dir=...)`` reads a copy TFDS
  prepared in ArrayRecord format without TensorFlow; preparing one needs TensorFlow for these
  image datasets, e.g. on another machine ``tfds build mnist --file_format=array_record
  --data_dir=DIR``. TFDS stores examples in its own shuffled order, so its validation split is
  not the same 5,000 images as the IDX files' one.
* ``cifar10``, ``cifar100`` (fine labels): inputs uint8 ``[N, 32, 32, 3]``, targets int32.
  Splits: train 45,000 / validation 5,000 (the first 5,000 of the train file) / test 10,000;
  same two options. Files: the official python pickle batches in ``cifar-10-batches-py/``
  (``data_batch_1`` .. ``data_batch_5``, ``test_batch``) or ``cifar-100-python/`` (``train``,
  ``test``), or those files directly in the folder; TFDS ``cifar10`` / ``cifar100``. The
  download is the published archive, extracted into the cache.
* ``twitter_pos``: the ARK TweetNLP Oct27 splits (not in TFDS): ``oct27.train``,
  ``oct27.dev``, ``oct27.test``, or in ``data_dir`` otherwise
  exactly one file per split whose name (less a ``.txt`` suffix) ends in ``train``, ``dev``,
  ``test``. UTF-8, one ``token<TAB>tag`` per line, a blank line between tweets, 25 tags.
  Splits train / validation (the dev file) / test. inputs int32 ``[tokens, 3]``: the word ids of
  the left, centre and right words, ``</s>`` beyond either end of a tweet; targets int32
  ``[tokens]``, indices into ``info["tags"]`` (the authors' tag order). Without embeddings the
  vocabulary is ``["</s>", "UUUNKKK"]`` then the sorted distinct train words, and
  ``info["embeddings"]`` is None. Option ``embeddings=<path>``: a text file with one word per
  line followed by its vector (whitespace separated; a later duplicate replaces an earlier one,
  as in the authors' code); the vocabulary is then the file's words in file order (it must
  contain ``</s>`` and ``UUUNKKK``) and ``info["embeddings"]`` is float32 ``[vocab, dim]``.
  Words outside the vocabulary map to ``UUUNKKK`` in every split. ``info["words"]``: per split,
  the word of each token (its window's centre) as the file spells it, in the targets' order.
* ``timit`` (licensed by the LDC: never downloaded; looked for in ``data_dir`` or, without
  it, the cache's ``timit/`` folder): ``train.npz``,
  ``validation.npz``, ``test.npz``, each holding ``features`` float ``[frames, 26]`` (all
  utterances of the split concatenated), ``labels`` int ``[frames]`` in 0..38 and ``lengths``
  int ``[utterances]`` (frames per utterance, summing to ``frames``). inputs float32
  ``[frames, 286]``: 11-frame windows (5 + 1 + 5, edge frames repeated inside each utterance)
  of features standardised with the train frames' per-feature mean and std (``info["mean"]``,
  ``info["std"]``; unlike the authors' code, padding frames are not counted and every split is
  centred once); targets int32; ``groups`` int32 ``[frames]`` = utterance index within the
  split (an utterance's frames are contiguous). :func:`convert_timit_h5` writes these files
  from the authors' h5 files (``train.h5``, ``dev.h5``, ``core.h5``; needs h5py)::

    python -c "from gelujax.data import convert_timit_h5; convert_timit_h5('h5/', 'data/timit')"

A dataset found nowhere raises a one-paragraph ValueError naming every place looked and how to
get it (offline: the URLs, the checksums and the folder to put the files in); a malformed file
raises a ValueError naming the file (and the line, for text files).

``python -m gelujax.data download NAME [--data_dir DIR]`` fetches a dataset ahead of time and
``python -m gelujax.data list`` shows, for each data set, the source :func:`load` would read it
from, or every place it looked (:func:`describe_sources`: the loader itself, without the
network).

Host-side preprocessing (NumPy, run once by the tasks): :func:`scale_pixels`,
:func:`add_uniform_noise`, :func:`fit_zca` / :func:`apply_zca`, :func:`subtract_pixel_mean`,
:func:`flip_double`.
"""

from __future__ import annotations

import contextvars
import functools
import gzip
import inspect
import logging
import math
import os
import pickle
import struct
import sys
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import download
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


# A source that does not have the dataset says why by raising it (not an error by itself).
_Missing = download.NotFound

# What `load` was asked for, for the sources it looks in: whether a download may be tried, and
# the cache folder (None: `gelujax.download.cache_root`'s default).
_NETWORK: contextvars.ContextVar[bool] = contextvars.ContextVar("gelujax_data_network")
_CACHE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("gelujax_data_cache")


class NoSource(ValueError):
  """No source has the data set. ``reasons``: ``(place, why not)`` in the order looked."""

  def __init__(self, message: str, reasons: list[tuple[str, str]]):
    super().__init__(message)
    self.reasons = reasons


def _cache_root() -> Path:
  return download.cache_root(_CACHE.get(None))


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
  data set is an error naming ``--data_dir``. Without it, in order: ``debian``, a TFDS copy
  in TFDS's default folder, the cache, then a download (`gelujax.download`).

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
        f"--data_dir {data_dir} does not exist or is not a folder; pass the folder that holds "
        f"{name!r}, or {_without_data_dir(name, data_dir, debian, tfds)}"
      )
    problem = f"--data_dir {data_dir} does not hold it"
    how_to_get = f"{how_to_get} Or {_without_data_dir(name, data_dir, debian, tfds)}"
  else:
    sources = [("--data_dir", _raise_not_given)]
    if debian is not None:
      sources.append(
        (f"{debian} (Debian package dataset-fashion-mnist)",
         lambda: _read_local(name, read, debian))
      )  # fmt: skip
    if tfds:
      sources.append((_tfds_where(name, None), lambda: from_tfds(None)))
    sources.extend(_cache_sources(name, read))
    problem = "no source has it"
    if name in download.PUBLISHED:
      how_to_get = f"{how_to_get} {download.where_to_put(name, _cache_root())}"
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
  """The cache under `gelujax.download.cache_root`, then a download into it (never for TIMIT,
  whose folder there is only looked in)."""
  root = _cache_root()

  def cached(network: bool) -> tuple[Any, dict[str, Any]]:
    if network and not _NETWORK.get(True):
      raise _Missing("not tried: the network was not asked for")
    if network and download.is_offline():
      value = os.environ[download.OFFLINE_VARIABLE]
      raise _Missing(f"not tried: {download.OFFLINE_VARIABLE}={value} forbids the network")
    try:
      entry = download.fetch(name, root, network=network)
    except _Missing as e:
      # A download tried next changes the folder: say when this was so.
      downloads = not network and _NETWORK.get(True) and not download.is_offline()
      raise _Missing(f"{e}, before the download" if downloads else str(e)) from None
    value, source, _ = read(entry.folder)
    return value, {"dataset": name, "source": source, **entry.record}

  if name not in download.PUBLISHED:
    return [(f"the cache {root / name}", lambda: _read_local(name, read, root / name))]
  return [
    (f"the cache {root / name}", lambda: cached(network=False)),
    (f"a download from {' or '.join(download.locations(name))}", lambda: cached(network=True)),
  ]


def _read_local(name: str, read: _Reader, folder: Path) -> tuple[Any, dict[str, Any]]:
  """``read(folder)`` and the record of the files it read, checked against the published ones."""
  value, source, paths = read(folder)
  return value, {"dataset": name, "source": source, **download.check_local(name, paths)}


def _without_data_dir(name: str, data_dir: Path, debian: Path | None, tfds: bool) -> str:
  """The end of a sentence: what leaving ``--data_dir`` out would do, or fetching into it."""
  cache = _cache_root() / name
  if name not in download.PUBLISHED:
    return f"leave --data_dir out to look in the cache {cache}."
  local = [
    *([f"Debian's copy in {debian} (apt-get install dataset-fashion-mnist)"] if debian else []),
    *(["a TFDS copy"] if tfds else []),
    f"the cache {cache} (downloaded there on first use)",
  ]
  return (
    f"leave --data_dir out to use {', '.join(local[:-1])}{' or ' if len(local) > 1 else ''}"
    f"{local[-1]}, or download it into --data_dir with `python -m gelujax.data download {name} "
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
  "let TFDS prepare {name!r} in ArrayRecord format in --data_dir or ~/tensorflow_datasets "
  "(online, with TensorFlow installed, e.g. `tfds build {name} --file_format=array_record "
  "--data_dir=DIR`; reading it back needs no TensorFlow)."
)


def _tfds_where(tfds_name: str, data_dir: Path | None) -> str:
  return f"TFDS {tfds_name!r} (data_dir {data_dir or 'TFDS default, ~/tensorflow_datasets'})"


# ------------------------------------------------------------------------ MNIST-like

_IDX_NAMES = (
  "train-images-idx3-ubyte",
  "train-labels-idx1-ubyte",
  "t10k-images-idx3-ubyte",
  "t10k-labels-idx1-ubyte",
)


def _open_idx(path: Path):
  """A binary stream of the file's bytes, gunzipped as they are read when it starts with the
  gzip magic (never more than is asked for: a small file that inflates to gigabytes is read
  only as far as its header says it goes)."""
  f = path.open("rb")
  if f.read(2) == b"\x1f\x8b":
    f.seek(0)
    return gzip.GzipFile(fileobj=f, mode="rb")
  f.seek(0)
  return f


def _read_exactly(stream, size: int, path: Path) -> bytes:
  try:
    return stream.read(size)
  except (OSError, EOFError, zlib.error) as e:
    raise ValueError(f"{path}: corrupt or truncated gzip file ({e}).") from None


def _read_idx(path: Path, shape: tuple[int, ...]) -> np.ndarray:
  """An IDX file of unsigned bytes whose shape is ``[N, *shape]``.

  The header's size is checked against the memory this process can have before the data are
  read, and no more data than the header announces are ever decompressed.
  """
  ndim = 1 + len(shape)
  header_size = 4 + 4 * ndim
  with _open_idx(path) as stream:
    header = _read_exactly(stream, header_size, path)
    if len(header) < 4 or header[:3] != b"\x00\x00\x08" or header[3] != ndim:
      raise ValueError(
        f"{path}: bad IDX magic number 0x{header[:4].hex()}; expected 0x0000080{ndim} "
        f"(unsigned bytes, {ndim} dimensions)."
      )
    dims = struct.unpack(f">{ndim}I", header[4:].ljust(4 * ndim, b"\0"))
    expected = math.prod(dims)
    if dims[1:] != shape:
      raise ValueError(
        f"{path}: IDX header says shape {list(dims)}; expected shape "
        f"[N, {', '.join(map(str, shape))}]."
      )
    from gelujax import host  # Here only: host imports JAX, which reading files does not need.

    available = host.available_memory()
    if expected > available:
      raise ValueError(
        f"{path}: IDX header says shape {list(dims)}, {expected / 1e9:.1f} GB of data, more than "
        f"the {available / 1e9:.1f} GB of memory available; the file is not a real data set."
      )
    data = _read_exactly(stream, expected + 1, path)  # One byte more shows extra data.
  if len(data) != expected:
    found = f"more than {expected}" if len(data) > expected else str(len(data))
    raise ValueError(
      f"{path}: IDX header says shape {list(dims)}, {expected} data bytes, but the file holds "
      f"{found} data bytes; expected shape [N, {', '.join(map(str, shape))}] with exactly "
      f"N*{math.prod(shape)} data bytes."
    )
  # A writable copy: read-only arrays surprise callers that normalise in place.
  return np.frombuffer(bytearray(data), np.uint8).reshape(dims)


def _read_idx_dir(folder: Path):
  paths = _find_files(folder, _IDX_NAMES, gzip_ok=True)
  arrays = []
  for images_path, labels_path in (paths[:2], paths[2:]):
    images = _read_idx(images_path, (28, 28))[..., None]
    labels = _read_idx(labels_path, ())
    if len(images) != len(labels):
      raise ValueError(
        f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} labels."
      )
    arrays.append((images, _check_labels(labels, 10, str(labels_path))))
  return arrays, f"IDX files in {folder}", paths


def _load_mnist_like(
  name: str, data_dir: Path | None, train_on_all: bool, validation_size: int
) -> Splits:
  how = (
    f"Pass --data_dir pointing at a folder holding {', '.join(_IDX_NAMES)} (each gzipped with "
    ".gz or not)"
  )
  if name == "fashion_mnist":
    how += ", install the Debian package (apt-get install dataset-fashion-mnist)"
  how += f", or {_TFDS_HOW.format(name=name)}"
  debian = DEBIAN_FASHION_MNIST if name == "fashion_mnist" else None
  (train, test), record = _find(name, data_dir, _read_idx_dir, how, debian=debian, tfds=True)
  info = {"num_classes": 10, "source": record["source"], "record": record}
  return _split_train(train, test, train_on_all, validation_size, info)


@DATASETS.register("mnist")
def _load_mnist(
  data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  return _load_mnist_like("mnist", data_dir, train_on_all, validation_size)


@DATASETS.register("fashion_mnist")
def _load_fashion_mnist(
  data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  return _load_mnist_like("fashion_mnist", data_dir, train_on_all, validation_size)


# ----------------------------------------------------------------------------- CIFAR

_CIFAR = {
  # name: (official folder, train files, test file, label key, classes)
  "cifar10": (
    "cifar-10-batches-py",
    tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test_batch",
    b"labels",
    10,
  ),
  "cifar100": ("cifar-100-python", ("train",), "test", b"fine_labels", 100),
}


class _ArrayUnpickler(pickle.Unpickler):
  """Unpickles only plain containers and NumPy arrays: a pickle can otherwise run code."""

  _ALLOWED = frozenset(
    {
      ("numpy.core.multiarray", "_reconstruct"),
      ("numpy._core.multiarray", "_reconstruct"),
      ("numpy", "ndarray"),
      ("numpy", "dtype"),
      ("_codecs", "encode"),  # How Python 3 writes bytes into protocol-2 pickles.
    }
  )

  def find_class(self, module: str, name: str):
    if (module, name) not in self._ALLOWED:
      raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
    return super().find_class(module, name)


def _read_cifar_batch(path: Path, label_key: bytes, num_classes: int):
  try:
    with path.open("rb") as f:
      batch = _ArrayUnpickler(f, encoding="bytes").load()
  except Exception as e:  # Any unpickling failure is a malformed file.
    raise ValueError(
      f"{path}: not a CIFAR python pickle batch ({type(e).__name__}: {e})."
    ) from None
  if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
    raise ValueError(
      f"{path}: a CIFAR batch must be a dict with keys b'data' and {label_key!r}; found "
      f"{sorted(batch) if isinstance(batch, dict) else type(batch).__name__}."
    )
  data, labels = np.asarray(batch[b"data"]), np.asarray(batch[label_key])
  if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
    raise ValueError(
      f"{path}: b'data' is {data.dtype} {list(data.shape)}; expected uint8 [N, 3072]."
    )
  if labels.shape != (len(data),):
    raise ValueError(f"{path}: {len(data)} images but {labels.size} labels.")
  images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # Rows are stored CHW.
  return np.ascontiguousarray(images), _check_labels(labels, num_classes, str(path))


def _read_cifar_dir(folder: Path, name: str):
  _, train_files, test_file, label_key, classes = _CIFAR[name]
  paths = _find_files(folder, (*train_files, test_file), gzip_ok=False)
  batches = [_read_cifar_batch(p, label_key, classes) for p in paths]
  train = tuple(np.concatenate(parts) for parts in zip(*batches[:-1], strict=True))
  return (train, batches[-1]), f"python pickle batches in {folder}", paths


def _load_cifar(
  name: str, data_dir: Path | None, train_on_all: bool, validation_size: int
) -> Splits:
  official, train_files, test_file, _, classes = _CIFAR[name]
  how = (
    f"Pass --data_dir pointing at a folder holding {official}/ (the official python version, "
    f"with {', '.join((*train_files, test_file))}), or {_TFDS_HOW.format(name=name)}"
  )
  read = functools.partial(_read_cifar_dir, name=name)
  (train, test), record = _find(name, data_dir, read, how, subfolder=official, tfds=True)
  info = {"num_classes": classes, "source": record["source"], "record": record}
  return _split_train(train, test, train_on_all, validation_size, info)


@DATASETS.register("cifar10")
def _load_cifar10(
  data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  return _load_cifar("cifar10", data_dir, train_on_all, validation_size)


@DATASETS.register("cifar100")
def _load_cifar100(
  data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  return _load_cifar("cifar100", data_dir, train_on_all, validation_size)


# ------------------------------------------------------------------------ Twitter POS

_TWITTER_SPLITS = {"train": "train", "validation": "dev", "test": "test"}


def _find_twitter_files(folder: Path) -> dict[str, Path]:
  if not folder.is_dir():
    raise _Missing("no such folder")
  if all((folder / f"oct27.{s}").is_file() for s in _TWITTER_SPLITS.values()):
    return {k: folder / f"oct27.{s}" for k, s in _TWITTER_SPLITS.items()}
  files = sorted(p for p in folder.iterdir() if p.is_file())
  matches = {
    k: [p for p in files if p.name.removesuffix(".txt").endswith(s)]
    for k, s in _TWITTER_SPLITS.items()
  }
  if not any(matches.values()):
    raise _Missing("no oct27.train / oct27.dev / oct27.test")
  for k, found in matches.items():
    if len(found) != 1:
      raise ValueError(
        f"Folder {folder}: expected exactly one file whose name ends in "
        f"{_TWITTER_SPLITS[k]!r} (the {k} split), found {[p.name for p in found]}."
      )
  return {k: found[0] for k, found in matches.items()}


def _read_twitter_dir(folder: Path):
  paths = _find_twitter_files(folder)
  return paths, f"ARK files {', '.join(str(p) for p in paths.values())}", list(paths.values())


def _read_ark(path: Path) -> list[tuple[list[str], list[int]]]:
  """Tweets of an ARK file as (tokens, tag indices)."""
  tag_index = {t: i for i, t in enumerate(TWITTER_TAGS)}
  tweets, tokens, tags = [], [], []
  for number, line in _text_lines(path):
    if not line.strip():
      if tokens:
        tweets.append((tokens, tags))
      tokens, tags = [], []
      continue
    fields = line.split("\t")
    if len(fields) != 2 or not fields[0]:
      raise ValueError(f"{path}, line {number}: expected 'token<TAB>tag', got {line!r}.")
    if fields[1] not in tag_index:
      raise ValueError(
        f"{path}, line {number}: unknown tag {fields[1]!r}; the 25 tags are "
        f"{' '.join(TWITTER_TAGS)}."
      )
    tokens.append(fields[0])
    tags.append(tag_index[fields[1]])
  if tokens:
    tweets.append((tokens, tags))
  if not tweets:
    raise ValueError(f"{path}: holds no tweets; expected token<TAB>tag lines, a blank line "
                     "between tweets.")  # fmt: skip
  return tweets


def _text_lines(path: Path):
  """``(number, line)`` of a UTF-8 text file (a BOM and any line ending allowed); a line that is
  not UTF-8 is a ValueError naming the file and the line."""
  with path.open("rb") as f:
    for number, raw in enumerate(f, 1):
      if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise ValueError(
          f"{path}, line {number}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
          f"{e.start + 1}); the file must be UTF-8."
        ) from None
      yield number, line.rstrip("\r\n")


def _read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
  if not path.is_file():
    raise ValueError(
      f"embeddings={str(path)!r}: no such file; expected a text file with one word per line "
      "followed by its vector."
    )
  vectors: dict[str, list[float]] = {}
  for number, line in _text_lines(path):
    fields = line.split()
    if not fields or (number == 1 and len(fields) == 2 and all(v.isdigit() for v in fields)):
      continue  # Blank, or word2vec's "<words> <dimension>" header line.
    try:
      vector = [float(v) for v in fields[1:]]
    except ValueError:
      vector = []
    if not vector or (vectors and len(vector) != len(next(iter(vectors.values())))):
      raise ValueError(
        f"{path}, line {number}: expected a word followed by numbers, as many as on the "
        f"first line; got {line[:80]!r}."
      )
    if not all(math.isfinite(v) and abs(v) <= _FLOAT32_MAX for v in vector):
      raise ValueError(
        f"{path}, line {number}: the vector of {fields[0]!r} holds NaN or infinite values (or "
        f"values beyond float32's {_FLOAT32_MAX:.3g}); every value must be a finite float32."
      )
    vectors[fields[0]] = vector
  if not vectors:
    raise ValueError(f"{path}: holds no word vectors; expected one word and its vector a line.")
  for word in (PAD_WORD, UNKNOWN_WORD):
    if word not in vectors:
      raise ValueError(f"{path}: the embeddings must include the word {word!r}.")
  return list(vectors), np.asarray(list(vectors.values()), np.float32)


def _window_ids(
  tweets: list[tuple[list[str], list[int]]], ids: dict[str, int]
) -> dict[str, np.ndarray]:
  unknown = ids[UNKNOWN_WORD]
  inputs, targets = [], []
  for tokens, tags in tweets:
    padded = [ids[PAD_WORD], *(ids.get(w, unknown) for w in tokens), ids[PAD_WORD]]
    inputs.extend(padded[i : i + 3] for i in range(len(tokens)))
    targets.extend(tags)
  return {
    "inputs": np.asarray(inputs, np.int32).reshape(-1, 3),
    "targets": np.asarray(targets, np.int32),
  }


@DATASETS.register("twitter_pos")
def _load_twitter_pos(data_dir: Path | None, *, embeddings: str | Path | None = None) -> Splits:
  paths, record = _find(
    "twitter_pos",
    data_dir,
    _read_twitter_dir,
    "It is not in TFDS: the ARK TweetNLP part-of-speech data (Owoputi et al. 2013, twpos-data) "
    "is downloaded on first use, or pass --data_dir pointing at its oct27.splits folder "
    "(oct27.train, oct27.dev, oct27.test; token<TAB>tag per line, a blank line between tweets).",
  )
  tweets = {k: _read_ark(p) for k, p in paths.items()}
  if not embeddings:
    train_words = {w for tokens, _ in tweets["train"] for w in tokens}
    vocab = [PAD_WORD, UNKNOWN_WORD, *sorted(train_words - {PAD_WORD, UNKNOWN_WORD})]
    vectors = None
  else:
    vocab, vectors = _read_embeddings(Path(embeddings))
  ids = {w: i for i, w in enumerate(vocab)}
  info = {
    "num_classes": len(TWITTER_TAGS),
    "source": record["source"],
    "record": record,
    "vocab": vocab,
    "tags": list(TWITTER_TAGS),
    "embeddings": vectors,
    "words": {k: [w for tokens, _ in t for w in tokens] for k, t in tweets.items()},
  }
  return Splits({k: _window_ids(t, ids) for k, t in tweets.items()}, info)


# ----------------------------------------------------------------------------- TIMIT

_TIMIT_SPLITS = ("train", "validation", "test")
# The authors' h5 file for each split (dev = full test set minus core; core = core test).
_TIMIT_H5 = {"train": "train.h5", "validation": "dev.h5", "test": "core.h5"}


def _check_timit_arrays(
  where: str, features: np.ndarray, labels: np.ndarray, lengths: np.ndarray
) -> None:
  if features.ndim != 2 or features.shape[1] != TIMIT_FEATURES:
    raise ValueError(
      f"{where}: features have shape {list(features.shape)}; expected [frames, {TIMIT_FEATURES}]."
    )
  if labels.shape != (len(features),):
    raise ValueError(
      f"{where}: {len(features)} feature frames but labels of shape {list(labels.shape)}."
    )
  if lengths.ndim != 1 or lengths.size == 0 or lengths.min() < 1:
    raise ValueError(f"{where}: lengths must be a non-empty list of positive frame counts.")
  if lengths.sum() != len(features):
    raise ValueError(
      f"{where}: utterance lengths sum to {lengths.sum()} but there are {len(features)} frames."
    )
  if not np.isfinite(features).all():
    raise ValueError(f"{where}: features contain NaN or infinite values.")
  _check_labels(labels, TIMIT_CLASSES, where)


def _read_timit_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  try:
    with np.load(path, allow_pickle=False) as f:
      arrays = {k: f[k] for k in ("features", "labels", "lengths") if k in f}
  except (OSError, ValueError, zlib.error) as e:
    raise ValueError(f"{path}: not a readable .npz file ({e}).") from None
  if len(arrays) != 3:
    raise ValueError(f"{path}: needs arrays features, labels and lengths; found {sorted(arrays)}.")
  features, labels, lengths = arrays["features"], arrays["labels"], arrays["lengths"]
  for key, array in (("labels", labels), ("lengths", lengths)):
    if not np.issubdtype(array.dtype, np.integer):
      raise ValueError(f"{path}: {key} must be integers, found {array.dtype}.")
  _check_timit_arrays(str(path), features, labels, lengths)
  return features.astype(np.float32), labels.astype(np.int32), lengths.astype(np.int64)


def _context_windows(features: np.ndarray, lengths: np.ndarray, context: int) -> np.ndarray:
  """Each frame with ``context`` frames either side, repeating each utterance's edge frames.

  Args:
    features: ``[frames, D]``, utterances concatenated.
    lengths: ``[utterances]`` frame counts summing to ``frames``.
    context: frames taken on each side.

  Returns:
    ``[frames, (2 * context + 1) * D]``: the window's frames in time order, flattened.
  """
  lengths = np.asarray(lengths, np.int64)
  starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
  ends = starts + np.repeat(lengths, lengths) - 1
  offsets = np.arange(-context, context + 1)
  frames = np.arange(len(features))[:, None] + offsets
  index = np.clip(frames, starts[:, None], ends[:, None])
  return features[index].reshape(len(features), -1)


@DATASETS.register("timit")
def _load_timit(data_dir: Path | None) -> Splits:
  names = [f"{s}.npz" for s in _TIMIT_SPLITS]

  def read(folder: Path):
    paths = _find_files(folder, names, gzip_ok=False)
    return paths, f"TIMIT files in {folder}", paths

  paths, record = _find(
    "timit",
    data_dir,
    read,
    "TIMIT is licensed by the LDC (catalog LDC93S1), not in TFDS and never downloaded: pass "
    f"--data_dir pointing at a folder holding {', '.join(names)} (arrays features [frames, "
    "26], labels [frames] in 0..38, lengths [utterances]); gelujax.data.convert_timit_h5 "
    "writes them from the authors' train.h5 / dev.h5 / core.h5.",
  )
  raw = {s: _read_timit_npz(p) for s, p in zip(_TIMIT_SPLITS, paths, strict=True)}
  train_features = raw["train"][0].astype(np.float64)
  mean, std = train_features.mean(0), train_features.std(0)
  std = np.where(std > 0, std, 1.0)  # A constant feature is centred, not blown up.
  splits = {}
  for split, (features, labels, lengths) in raw.items():
    standardised = ((features - mean) / std).astype(np.float32)
    splits[split] = {
      "inputs": _context_windows(standardised, lengths, TIMIT_CONTEXT),
      "targets": labels,
      "groups": np.repeat(np.arange(len(lengths), dtype=np.int32), lengths),
    }
  info = {
    "num_classes": TIMIT_CLASSES,
    "source": record["source"],
    "record": record,
    "mean": mean.astype(np.float32),
    "std": std.astype(np.float32),
  }
  return Splits(splits, info)


def convert_timit_h5(h5_dir: str | Path, out_dir: str | Path) -> dict[str, int]:
  """Converts the authors' TIMIT h5 files to the ``.npz`` files :func:`load` reads.

  Each h5 file holds ``X`` [n, T, 26] (utterances left-padded to T frames), ``y`` [n, T] and
  ``start_idx`` [n] (utterance i is ``X[i, start_idx[i]:]``). ``train.h5``, ``dev.h5`` and
  ``core.h5`` in ``h5_dir`` become ``train.npz``, ``validation.npz`` and ``test.npz`` in
  ``out_dir``; padding frames are dropped. Needs h5py.

  Returns:
    The number of utterances written per split.
  """
  import h5py  # Only this converter needs it.

  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  counts = {}
  for split, h5_name in _TIMIT_H5.items():
    path = Path(h5_dir) / h5_name
    if not path.is_file():
      raise ValueError(f"convert_timit_h5: {path} does not exist; {h5_dir} must hold "
                       f"{', '.join(_TIMIT_H5.values())}.")  # fmt: skip
    with h5py.File(path, "r") as f:
      missing = {"X", "y", "start_idx"} - set(f)
      if missing:
        raise ValueError(f"{path}: missing datasets {sorted(missing)} (needs X, y, start_idx).")
      x, y, start = f["X"][()], f["y"][()], f["start_idx"][()].astype(np.int64)
    if x.ndim != 3 or y.shape != x.shape[:2] or start.shape != x.shape[:1]:
      raise ValueError(
        f"{path}: shapes X {list(x.shape)}, y {list(y.shape)}, start_idx {list(start.shape)}; "
        "expected [n, T, 26], [n, T], [n]."
      )
    if start.size and (start.min() < 0 or start.max() >= x.shape[1]):
      raise ValueError(f"{path}: start_idx must lie in 0..{x.shape[1] - 1}.")
    if not np.array_equal(y, np.round(y)):
      raise ValueError(f"{path}: y holds non-integer labels.")
    features = np.concatenate([u[s:] for u, s in zip(x, start, strict=True)])
    labels = np.concatenate([u[s:] for u, s in zip(y, start, strict=True)]).astype(np.int32)
    lengths = (x.shape[1] - start).astype(np.int32)
    _check_timit_arrays(str(path), features, labels, lengths)
    np.savez(
      out_dir / f"{split}.npz",
      features=features.astype(np.float32),
      labels=labels,
      lengths=lengths,
    )
    counts[split] = len(lengths)
  return counts


if __name__ == "__main__":
  sys.exit(download.main())
