"""The published data files: where they are, their checksums, and where gelujax keeps them.

`PUBLISHED` is the one table of every data set gelujax downloads: each file's published name,
sha256 and size, and the URL prefixes that publish it (`lookup`: one data set's entry).

* **Where to.** `cache_root`: the folder given (``data_dir``), else ``$GELUJAX_DATA_DIR``, else
  ``~/.cache/gelujax/datasets``; a data set's files go in ``<root>/<dataset>/``.
* **Where from.** `locations`: ``$GELUJAX_DATA_MIRROR/<dataset>/<file>`` first (a lab's mirror,
  under the same checksums; ``http://``, ``https://`` or ``file://``), then each published
  location in turn. ``GELUJAX_OFFLINE=1`` never touches the network (`is_offline`), and
  `where_to_put` says how to put the files there by hand.

TIMIT is licensed by the LDC and is never downloaded.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from gelujax.registry import close_names, did_you_mean, sentences

DATA_DIR_VARIABLE = "GELUJAX_DATA_DIR"
MIRROR_VARIABLE = "GELUJAX_DATA_MIRROR"
OFFLINE_VARIABLE = "GELUJAX_OFFLINE"
DEFAULT_CACHE = Path("~/.cache/gelujax/datasets")


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
  "tiny_shakespeare": Published(
    files=(
      PublishedFile(
        "input.txt", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed", 1115394
      ),
    ),
    # karpathy/char-rnn at the commit the checksum was read from, then its master branch.
    locations=(
      "https://raw.githubusercontent.com/karpathy/char-rnn/"
      "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare/",
      "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/",
    ),
  ),
}


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


def lookup(dataset: str) -> Published:
  """The table's entry for ``dataset``.

  Raises:
    ValueError: gelujax does not download it (TIMIT, or an unknown name).
  """
  if dataset == "timit":
    raise ValueError(
      "TIMIT is licensed by the LDC (catalog LDC93S1) and is never downloaded: obtain it from "
      "the LDC, convert the authors' h5 files with gelujax.data.convert_timit_h5, and pass "
      "`data_dir` pointing at the folder holding train.npz, validation.npz and test.npz."
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
  return [*([mirror] if mirror else []), *lookup(dataset).locations]


def where_to_put(dataset: str, root: Path) -> str:
  """The sentences of an error that say how to get ``dataset`` into the cache by hand."""
  spec = lookup(dataset)
  files = ", ".join(f"{f.name} (sha256 {f.sha256}, {f.size} bytes)" for f in spec.files)
  urls = " or ".join(locations(dataset))
  return (
    f"Offline or without a network, put the published files in {root / dataset}/ ({files}; "
    f"from {urls}), or fetch them ahead on a machine with a network with `python -m "
    f"gelujax.data download {dataset} --data_dir DIR` and copy DIR/{dataset}/ there (or set "
    f"{DATA_DIR_VARIABLE}=DIR); a mirror of <prefix>/{dataset}/<file> is used first when "
    f"{MIRROR_VARIABLE}=<prefix> is set."
  )
