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
(the python pickle batches), :mod:`gelujax.data.twitter` (ARK TweetNLP files: ``twitter_pos``),
:mod:`gelujax.data.shakespeare` (one text file: ``tiny_shakespeare``, character by character)
and :mod:`gelujax.data.timit` (``.npz`` files, and the converter from the authors' h5 files).
The search above, and what else the readers share, is :mod:`gelujax.data.sources`.

A dataset found nowhere raises a one-paragraph ValueError naming every place looked and how to
get it (offline: the URLs, the checksums and the folder to put the files in); a malformed file
raises a ValueError naming the file (and the line, for text files).

``python -m gelujax.data download NAME [--data_dir DIR]`` fetches a dataset ahead of time and
``python -m gelujax.data list`` shows, for each data set, the source :func:`load` would read it
from, or every place it looked (:func:`describe_sources`: the loader itself, without the
network).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The readers enter their loaders in DATASETS as they are imported.
from gelujax.data import cifar, mnist, shakespeare, timit, twitter  # noqa: F401
from gelujax.data.sources import DATASETS, NoSource, Splits, searching
from gelujax.data.timit import convert_timit_h5  # noqa: F401  (gelujax.data.convert_timit_h5)


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
  with searching(network=network, cache=Path(cache) if cache else None):
    # An empty string (a flag's default) means no data_dir, like None.
    return loader(Path(data_dir) if data_dir else None, **options)


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
      lines.append(f"{name:<18}missing   looked in: {looked}")
    except ValueError as e:
      lines.append(f"{name:<18}unusable  {' '.join(str(e).split())}")
    else:
      lines.append(f"{name:<18}found     {record['source']}; {record['verified']}")
  return lines


def describe_record(record: dict[str, Any]) -> str:
  """One line for a run's log: the data set, where it was read, what was verified, checksums."""
  sha256 = ", ".join(f"{name} {digest[:12]}" for name, digest in record["sha256"].items())
  return (
    f"data {record['dataset']}: {record['source']}; {record['verified']}"
    f"{f'; sha256 {sha256}' if sha256 else ''}."
  )
