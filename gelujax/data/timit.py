"""TIMIT's ``.npz`` files, and their converter from the authors' h5 files (a reader of
:mod:`gelujax.data`).

``timit`` (licensed by the LDC: never downloaded; looked for in ``data_dir`` or, without
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
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from gelujax.data.sources import DATASETS, Splits, check_labels, find, find_files

TIMIT_FEATURES = 26
TIMIT_CLASSES = 39
TIMIT_CONTEXT = 5  # frames each side of the centre frame

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
  check_labels(labels, TIMIT_CLASSES, where)


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
    paths = find_files(folder, names, gzip_ok=False)
    return paths, f"TIMIT files in {folder}", paths

  paths, record = find(
    "timit",
    data_dir,
    read,
    "TIMIT is licensed by the LDC (catalog LDC93S1), not in TFDS and never downloaded: pass "
    f"`data_dir` pointing at a folder holding {', '.join(names)} (arrays features [frames, "
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
