"""IDX files: MNIST and Fashion-MNIST (a reader of :mod:`gelujax.data`).

``mnist``, ``fashion_mnist``: inputs uint8 ``[N, 28, 28, 1]``, targets int32. Splits: train
55,000 / validation 5,000 (the FIRST 5,000 of the train file) / test 10,000. Options
``train_on_all=True`` (train = all 60,000, no validation split; the autoencoder) and
``validation_size`` (default 5,000). Files: ``train-images-idx3-ubyte``,
``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
gzipped (``.gz``) or not. TFDS: ``tfds.data_source(name, data_dir=...)`` reads a copy TFDS
prepared in ArrayRecord format without TensorFlow; preparing one needs TensorFlow for these
image datasets, e.g. on another machine ``tfds build mnist --file_format=array_record
--data_dir=DIR``. TFDS stores examples in its own shuffled order, so its validation split is
not the same 5,000 images as the IDX files' one.
"""

from __future__ import annotations

import functools
import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from gelujax.data.sources import (
  DATASETS,
  TFDS_HOW,
  Splits,
  check_labels,
  find,
  find_files,
  split_train,
)

# Fashion-MNIST as Debian's package dataset-fashion-mnist installs it.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")

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
  with path.open("rb") as f:
    gzipped = f.read(2) == b"\x1f\x8b"
  # gzip.open closes the file it opens (a GzipFile given a file object leaves it open).
  return gzip.open(path, "rb") if gzipped else path.open("rb")


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
  paths = find_files(folder, _IDX_NAMES, gzip_ok=True)
  arrays = []
  for images_path, labels_path in (paths[:2], paths[2:]):
    images = _read_idx(images_path, (28, 28))[..., None]
    labels = _read_idx(labels_path, ())
    if len(images) != len(labels):
      raise ValueError(
        f"{images_path} has {len(images)} images but {labels_path} has {len(labels)} labels."
      )
    arrays.append((images, check_labels(labels, 10, str(labels_path))))
  return arrays, f"IDX files in {folder}", paths


def _load_mnist_like(
  name: str, data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  how = (
    f"Pass `data_dir` pointing at a folder holding {', '.join(_IDX_NAMES)} (each gzipped with "
    ".gz or not)"
  )
  if name == "fashion_mnist":
    how += ", install the Debian package (apt-get install dataset-fashion-mnist)"
  how += f", or {TFDS_HOW.format(name=name)}"
  debian = DEBIAN_FASHION_MNIST if name == "fashion_mnist" else None
  (train, test), record = find(name, data_dir, _read_idx_dir, how, debian=debian, tfds=True)
  info = {"num_classes": 10, "source": record["source"], "record": record}
  return split_train(train, test, train_on_all, validation_size, info)


# One loader per data set: _load_mnist_like with its name bound (its options, the keywords).
for _name in ("mnist", "fashion_mnist"):
  DATASETS.register(_name, functools.partial(_load_mnist_like, _name))
