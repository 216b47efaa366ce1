"""The CIFAR python pickle batches: CIFAR-10 and CIFAR-100 (a reader of :mod:`gelujax.data`).

``cifar10``, ``cifar100`` (fine labels): inputs uint8 ``[N, 32, 32, 3]``, targets int32.
Splits: train 45,000 / validation 5,000 (the first 5,000 of the train file) / test 10,000;
same two options. Files: the official python pickle batches in ``cifar-10-batches-py/``
(``data_batch_1`` .. ``data_batch_5``, ``test_batch``) or ``cifar-100-python/`` (``train``,
``test``), or those files directly in the folder; TFDS ``cifar10`` / ``cifar100``. The
download is the published archive, extracted into the cache.
"""

from __future__ import annotations

import functools
import pickle
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
  return np.ascontiguousarray(images), check_labels(labels, num_classes, str(path))


def _read_cifar_dir(folder: Path, name: str):
  _, train_files, test_file, label_key, classes = _CIFAR[name]
  paths = find_files(folder, (*train_files, test_file), gzip_ok=False)
  batches = [_read_cifar_batch(p, label_key, classes) for p in paths]
  train = tuple(np.concatenate(parts) for parts in zip(*batches[:-1], strict=True))
  return (train, batches[-1]), f"python pickle batches in {folder}", paths


def _load_cifar(
  name: str, data_dir: Path | None, *, train_on_all: bool = False, validation_size: int = 5000
) -> Splits:
  official, train_files, test_file, _, classes = _CIFAR[name]
  how = (
    f"Pass `data_dir` pointing at a folder holding {official}/ (the official python version, "
    f"with {', '.join((*train_files, test_file))}), or {TFDS_HOW.format(name=name)}"
  )
  read = functools.partial(_read_cifar_dir, name=name)
  (train, test), record = find(name, data_dir, read, how, subfolder=official, tfds=True)
  info = {"num_classes": classes, "source": record["source"], "record": record}
  return split_train(train, test, train_on_all, validation_size, info)


# One loader per data set: _load_cifar with its name bound (its options, the keywords).
for _name in ("cifar10", "cifar100"):
  DATASETS.register(_name, functools.partial(_load_cifar, _name))
