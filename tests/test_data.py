"""Tests for gelujax.data: every reader against fixtures written here in the real formats."""

import gzip
import itertools
import os
import pickle
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
import scipy.linalg
import tensorflow_datasets as tfds

from gelujax import data, preprocessing
from gelujax.data import mnist, published
from gelujax.data.__main__ import main as data_main

RNG = np.random.default_rng(0)


def write_idx(path, array, compress=True):
  """An IDX file of unsigned bytes, header written by hand from the format's definition."""
  header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
  payload = header + array.astype(np.uint8).tobytes()
  if compress:
    path = path.with_name(path.name + ".gz")
    payload = gzip.compress(payload)
  path.write_bytes(payload)
  return path


def write_mnist(folder, n_train=12, n_test=4, compress=True):
  folder.mkdir(parents=True, exist_ok=True)
  arrays = {
    "train-images-idx3-ubyte": RNG.integers(0, 256, (n_train, 28, 28)),
    "train-labels-idx1-ubyte": np.arange(n_train) % 10,
    "t10k-images-idx3-ubyte": RNG.integers(0, 256, (n_test, 28, 28)),
    "t10k-labels-idx1-ubyte": (np.arange(n_test) * 3) % 10,
  }
  for name, array in arrays.items():
    write_idx(folder / name, array, compress)
  return arrays


@pytest.fixture
def no_tfds(monkeypatch):
  """TFDS unavailable, as on an offline machine (CI may be online)."""

  def fail(*args, **kwargs):
    raise ConnectionError("offline")

  monkeypatch.setattr(tfds, "data_source", fail)


@pytest.fixture
def no_debian(monkeypatch, tmp_path):
  monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")


# ------------------------------------------------------------------------ generic


def test_dataset_names():
  assert data.dataset_names() == sorted(
    ["mnist", "fashion_mnist", "cifar10", "cifar100", "twitter_pos", "timit", "tiny_shakespeare"]
  )


def test_unknown_dataset_lists_known_ones():
  with pytest.raises(ValueError, match=r"imagenet.*cifar10.*twitter_pos"):
    data.load("imagenet")


def test_unknown_option_lists_valid_ones(tmp_path):
  with pytest.raises(ValueError, match=r"\['shuffle'\].*'mnist'.*train_on_all"):
    data.load("mnist", tmp_path, shuffle=True)


# --------------------------------------------------------------------- MNIST-like


@pytest.mark.parametrize("compress", [True, False])
def test_mnist_from_idx_files(tmp_path, compress, no_tfds):
  arrays = write_mnist(tmp_path, compress=compress)
  splits = data.load("mnist", tmp_path, validation_size=3)
  images = arrays["train-images-idx3-ubyte"].astype(np.uint8)[..., None]
  labels = arrays["train-labels-idx1-ubyte"]
  assert set(splits) == {"train", "validation", "test"}
  np.testing.assert_array_equal(splits["validation"]["inputs"], images[:3])
  np.testing.assert_array_equal(splits["validation"]["targets"], labels[:3])
  np.testing.assert_array_equal(splits["train"]["inputs"], images[3:])
  np.testing.assert_array_equal(splits["train"]["targets"], labels[3:])
  np.testing.assert_array_equal(splits["test"]["inputs"][..., 0], arrays["t10k-images-idx3-ubyte"])
  np.testing.assert_array_equal(splits["test"]["targets"], [0, 3, 6, 9])
  assert splits["train"]["inputs"].dtype == np.uint8
  assert splits["train"]["targets"].dtype == np.int32
  assert splits.info["num_classes"] == 10
  assert str(tmp_path) in splits.info["source"]
  splits["train"]["inputs"][0] = 0  # Arrays are writable.


def test_loaded_data_print_as_their_name_splits_sizes_shapes_and_dtypes(tmp_path):
  write_mnist(tmp_path, n_train=1200, n_test=400)
  splits = data.load("fashion_mnist", tmp_path, validation_size=300)
  assert str(splits) == repr(splits)
  assert repr(splits) == (
    "Splits 'fashion_mnist' (info: num_classes, source, record):\n"
    "  train       900 examples: inputs uint8 (900, 28, 28, 1), targets int32 (900,)\n"
    "  validation  300 examples: inputs uint8 (300, 28, 28, 1), targets int32 (300,)\n"
    "  test        400 examples: inputs uint8 (400, 28, 28, 1), targets int32 (400,)"
  )
  bare = data.Splits({"train": {"inputs": np.zeros((2, 3), np.float32), "lengths": [3, 4]}}, {})
  assert repr(bare) == (
    "Splits (info: none):\n  train  2 examples: inputs float32 (2, 3), lengths list"
  )


def test_train_on_all_has_no_validation(tmp_path, no_tfds):
  arrays = write_mnist(tmp_path)
  splits = data.load("fashion_mnist", tmp_path, train_on_all=True)
  assert set(splits) == {"train", "test"}
  np.testing.assert_array_equal(
    splits["train"]["inputs"][..., 0], arrays["train-images-idx3-ubyte"]
  )


def test_files_in_subfolder_named_after_dataset(tmp_path, no_tfds, no_debian):
  arrays = write_mnist(tmp_path / "fashion_mnist")
  splits = data.load("fashion_mnist", tmp_path, validation_size=2)
  np.testing.assert_array_equal(splits["train"]["targets"], arrays["train-labels-idx1-ubyte"][2:])


def test_data_dir_preferred_over_debian_copy(tmp_path, no_tfds, monkeypatch):
  write_mnist(tmp_path / "debian")
  arrays = write_mnist(tmp_path / "mine", n_train=8)
  monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "debian")
  splits = data.load("fashion_mnist", tmp_path / "mine", train_on_all=True)
  np.testing.assert_array_equal(
    splits["train"]["inputs"][..., 0], arrays["train-images-idx3-ubyte"]
  )
  splits = data.load("fashion_mnist", train_on_all=True)
  assert splits.info["source"] == f"IDX files in {tmp_path / 'debian'}"
  assert len(splits["train"]["inputs"]) == 12


def test_list_shows_where_load_reads_each_data_set(tmp_path, no_tfds, monkeypatch, capsys):
  """`python -m gelujax.data list` once called Debian's Fashion-MNIST missing (it looked only in
  the cache) while `load` read it: the listing is the loader's search, in its order and words."""
  write_mnist(tmp_path / "debian", n_train=5001)  # the default split holds 5000 out
  monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "debian")
  cache = tmp_path / "cache"
  assert data_main(["list", "--data_dir", str(cache)]) == 0
  listing = {line[:18].strip(): line[18:] for line in capsys.readouterr().out.splitlines()[1:]}
  assert sorted(listing) == data.dataset_names()
  assert listing["fashion_mnist"].startswith(f"found     IDX files in {tmp_path / 'debian'}; ")
  assert listing["mnist"] == (
    f"missing   looked in: --data_dir (not given); TFDS 'mnist' (data_dir TFDS default, "
    f"~/tensorflow_datasets) (no prepared copy); the cache {cache / 'mnist'} (no such folder); "
    f"a download from {' or '.join(published.locations('mnist'))} (not tried: the network was not "
    "asked for)"
  )
  assert listing["timit"] == (
    f"missing   looked in: --data_dir (not given); the cache {cache / 'timit'} (no such folder)"
  )
  assert not cache.exists()  # nothing fetched, nothing made


def test_a_near_miss_data_set_name_gets_a_suggestion(capsys):
  assert data_main(["download", "cifar11"]) == 1
  error = capsys.readouterr().err
  assert error.startswith(
    "python -m gelujax.data: error: No published files for data set 'cifar11'. Did you mean "
    "cifar10? gelujax downloads mnist,"
  )
  with pytest.raises(
    ValueError, match=r"Unknown dataset 'fashion_mnsit'\. Did you mean fashion_mnist\?"
  ):
    data.load("fashion_mnsit")


@pytest.mark.parametrize("size", [0, 12, -1])
def test_bad_validation_size(tmp_path, size):
  write_mnist(tmp_path)
  with pytest.raises(ValueError, match=rf"validation_size={size}.*between 1 and 11"):
    data.load("mnist", tmp_path, validation_size=size)


def test_no_source_error_names_every_place_and_remedy(tmp_path, no_tfds, no_debian):
  with pytest.raises(ValueError) as info:
    data.load("fashion_mnist", tmp_path)
  message = str(info.value)
  for expected in [
    "'fashion_mnist'",
    f"data_dir {tmp_path} (none of",
    f"data_dir {tmp_path / 'fashion_mnist'} (no such folder)",
    str(tmp_path / "no-debian"),
    "apt-get install dataset-fashion-mnist",
    "TFDS 'fashion_mnist'",
    "(no prepared copy)",
    "t10k-labels-idx1-ubyte",
  ]:
    assert expected in message
  assert "\n" not in message


def test_no_source_without_data_dir(no_tfds):
  with pytest.raises(ValueError, match=r"'mnist'.*`data_dir` \(not given\).*TFDS 'mnist'"):
    data.load("mnist")


def test_half_copied_dataset_names_missing_files(tmp_path):
  write_mnist(tmp_path)
  (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
  with pytest.raises(ValueError, match=rf"{tmp_path}.*missing t10k-labels-idx1-ubyte"):
    data.load("mnist", tmp_path)


def corrupt_magic(path):
  path.write_bytes(b"\x00\x00\x09\x03" + path.read_bytes()[4:])


def corrupt_shape(path):
  write_idx(path, np.zeros((3, 27, 28)), compress=False)


def corrupt_size(path):
  path.write_bytes(path.read_bytes()[:-5])


@pytest.mark.parametrize(
  ("corrupt", "match"),
  [
    (corrupt_magic, r"bad IDX magic number 0x00000903; expected 0x00000803"),
    (corrupt_shape, r"IDX header says shape \[3, 27, 28\].*expected shape \[N, 28, 28\]"),
    (
      corrupt_size,
      r"IDX header says shape \[12, 28, 28\], 9408 data bytes, but the file "
      r"holds 9403 data bytes",
    ),
  ],
)
def test_malformed_idx_names_file(tmp_path, corrupt, match):
  write_mnist(tmp_path, compress=False)
  path = tmp_path / "train-images-idx3-ubyte"
  corrupt(path)
  with pytest.raises(ValueError, match=rf"{path}: {match}"):
    data.load("mnist", tmp_path)


def write_gzip_bomb(path, header, inflated):
  """A gzip file of ``header`` then ``inflated`` zero bytes (deflate packs zeros ~1000:1)."""
  compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
  with open(path, "wb") as f:
    f.write(compressor.compress(header))
    for _ in range(inflated >> 24):
      f.write(compressor.compress(bytes(1 << 24)))
    f.write(compressor.flush())


def test_gzip_bomb_is_refused_in_bounded_memory(tmp_path):
  write_mnist(tmp_path)
  path = tmp_path / "train-images-idx3-ubyte.gz"
  header = b"\x00\x00\x08\x03" + struct.pack(">3I", 12, 28, 28)
  write_gzip_bomb(path, header, 256 << 20)  # 256 MiB of zeros in a file of ~250 KB
  assert path.stat().st_size < 1 << 20
  tracemalloc.start()
  try:
    with pytest.raises(ValueError, match=rf"{path}: IDX header says shape \[12, 28, 28\], 9408 "
                       r"data bytes, but the file holds more than 9408"):  # fmt: skip
      data.load("mnist", tmp_path)
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert peak < 8 << 20  # a few MB, not the 256 MiB it inflates to


def test_idx_header_beyond_memory_is_refused_before_reading(tmp_path):
  write_mnist(tmp_path)
  path = tmp_path / "train-images-idx3-ubyte.gz"
  path.write_bytes(gzip.compress(b"\x00\x00\x08\x03" + struct.pack(">3I", 2**31, 28, 28)))
  with pytest.raises(ValueError, match=rf"{path}: IDX header says shape \[2147483648, 28, 28\], "
                     r"1683.6 GB of data, more than the .* GB of memory available"):  # fmt: skip
    data.load("mnist", tmp_path)


def test_truncated_gzip(tmp_path):
  write_mnist(tmp_path)
  path = tmp_path / "t10k-images-idx3-ubyte.gz"
  path.write_bytes(path.read_bytes()[:100])
  with pytest.raises(ValueError, match=rf"{path}: corrupt or truncated gzip"):
    data.load("mnist", tmp_path)


def test_label_count_and_range_checked(tmp_path):
  write_mnist(tmp_path)
  write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([0, 1, 2]))
  with pytest.raises(ValueError, match=r"4 images but .*t10k-labels-idx1-ubyte.gz has 3 labels"):
    data.load("mnist", tmp_path)
  write_idx(tmp_path / "t10k-labels-idx1-ubyte", np.array([0, 1, 10, 2]))
  with pytest.raises(ValueError, match=r"labels must lie in 0..9, found 0..10"):
    data.load("mnist", tmp_path)


# ------------------------------------------------------------------------- TFDS


@pytest.mark.parametrize(
  ("name", "shape", "classes"),
  [("mnist", (28, 28, 1), 10), ("fashion_mnist", (28, 28, 1), 10), ("cifar100", (32, 32, 3), 100)],
)
def test_tfds_fallback_under_mock_data(tmp_path, no_debian, name, shape, classes):
  with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
    splits = data.load(name, tmp_path, validation_size=2)
    # A second code path: read the same mocked source directly.
    source = tfds.data_source(name, split="train", data_dir=str(tmp_path))
    images = np.stack([source[i]["image"] for i in range(len(source))])
    labels = np.array([source[i]["label"] for i in range(len(source))])
  assert splits["train"]["inputs"].shape == (4, *shape)
  assert splits["train"]["inputs"].dtype == np.uint8
  np.testing.assert_array_equal(splits["validation"]["inputs"], images[:2])
  np.testing.assert_array_equal(splits["train"]["targets"], labels[2:])
  assert splits["test"]["targets"].dtype == np.int32
  assert splits.info["num_classes"] == classes
  assert splits.info["source"].startswith(f"TFDS {name!r}")


# ----------------------------------------------------------------------------- CIFAR


def write_cifar_batch(path, images_nhwc, labels, label_key=b"labels"):
  """A batch as the official (Python 2) pickles: bytes keys, CHW rows of 3072 bytes."""
  batch = {
    b"batch_label": b"fixture",
    b"data": images_nhwc.transpose(0, 3, 1, 2).reshape(len(images_nhwc), -1),
    label_key: [int(v) for v in labels],  # Python ints, as in the official files
  }
  if label_key == b"fine_labels":
    batch[b"coarse_labels"] = [9] * len(labels)
  path.write_bytes(pickle.dumps(batch, protocol=2))


def test_cifar10_pickle_batches(tmp_path, no_tfds):
  folder = tmp_path / "cifar-10-batches-py"
  folder.mkdir()
  images = RNG.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
  labels = np.arange(12) % 10
  for i in range(5):
    write_cifar_batch(
      folder / f"data_batch_{i + 1}", images[2 * i : 2 * i + 2], labels[2 * i : 2 * i + 2]
    )
  write_cifar_batch(folder / "test_batch", images[10:], labels[10:])
  splits = data.load("cifar10", tmp_path, validation_size=3)
  np.testing.assert_array_equal(splits["validation"]["inputs"], images[:3])
  np.testing.assert_array_equal(splits["train"]["inputs"], images[3:10])
  np.testing.assert_array_equal(splits["train"]["targets"], labels[3:10])
  np.testing.assert_array_equal(splits["test"]["inputs"], images[10:])
  # Row layout by hand: channel c of pixel (h, w) is byte 1024 c + 32 h + w.
  row = pickle.loads((folder / "test_batch").read_bytes(), encoding="bytes")[b"data"][1]
  assert splits["test"]["inputs"][1, 5, 7, 2] == row[1024 * 2 + 32 * 5 + 7]
  assert splits["test"]["targets"].dtype == np.int32
  assert splits.info["num_classes"] == 10


def test_cifar100_fine_labels_and_train_on_all(tmp_path, no_tfds):
  images = RNG.integers(0, 256, (7, 32, 32, 3), dtype=np.uint8)
  write_cifar_batch(tmp_path / "train", images[:5], [99, 0, 42, 7, 3], b"fine_labels")
  write_cifar_batch(tmp_path / "test", images[5:], [1, 2], b"fine_labels")
  splits = data.load("cifar100", tmp_path, train_on_all=True)
  assert set(splits) == {"train", "test"}
  np.testing.assert_array_equal(splits["train"]["targets"], [99, 0, 42, 7, 3])
  np.testing.assert_array_equal(splits["train"]["inputs"], images[:5])
  assert splits.info["num_classes"] == 100


def test_cifar_malformed_batch(tmp_path):
  images = np.zeros((2, 32, 32, 3), np.uint8)
  write_cifar_batch(tmp_path / "train", images, [0, 1], b"fine_labels")
  (tmp_path / "test").write_bytes(
    pickle.dumps({b"data": np.zeros((2, 3000), np.uint8), b"fine_labels": [0, 1]})
  )
  with pytest.raises(ValueError, match=r"test: b'data' is uint8 \[2, 3000\]; expected"):
    data.load("cifar100", tmp_path)


class Exploit:
  def __reduce__(self):
    return (os.system, ("echo pwned",))


def test_cifar_pickle_cannot_run_code(tmp_path):
  write_cifar_batch(tmp_path / "train", np.zeros((2, 32, 32, 3), np.uint8), [0, 1], b"fine_labels")
  (tmp_path / "test").write_bytes(pickle.dumps({b"data": Exploit()}))
  with pytest.raises(ValueError, match=r"not a CIFAR python pickle batch.*refusing.*system"):
    data.load("cifar100", tmp_path)


# ----------------------------------------------------------------------- Twitter POS

TRAIN_ARK = "I\tO\n❤️\tE\n東京\t^\n\nnaïve\tA\nI\tO\n"  # no blank line at the end
DEV_ARK = "\r\n\r\nI\tO\r\nzzz\tN\r\n\r\n\r\n@user\t@\r\n"  # CRLF, runs of blank lines
TEST_ARK = "東京\t^\n\n"


def write_ark(folder, names=("oct27.train", "oct27.dev", "oct27.test")):
  folder.mkdir(parents=True, exist_ok=True)
  for name, text in zip(names, (TRAIN_ARK, DEV_ARK, TEST_ARK), strict=True):
    (folder / name).write_bytes(text.encode())


def test_twitter_windows_by_hand(tmp_path):
  write_ark(tmp_path)
  splits = data.load("twitter_pos", tmp_path)
  vocab = splits.info["vocab"]
  # Sorted train words after the two reserved ones.
  assert vocab == ["</s>", "UUUNKKK", "I", "naïve", "❤️", "東京"]  # U+2764 < U+6771
  pad, unk, i, naive, heart, tokyo = range(6)
  np.testing.assert_array_equal(
    splits["train"]["inputs"],
    [[pad, i, heart], [i, heart, tokyo], [heart, tokyo, pad], [pad, naive, i], [naive, i, pad]],
  )
  tags = splits.info["tags"]
  assert len(tags) == 25 and tags[:4] == ["N", "O", "S", "^"]
  np.testing.assert_array_equal(splits["train"]["targets"], [tags.index(t) for t in "OE^AO"])
  np.testing.assert_array_equal(
    splits["validation"]["inputs"], [[pad, i, unk], [i, unk, pad], [pad, unk, pad]]
  )
  np.testing.assert_array_equal(splits["validation"]["targets"], [1, 0, 18])
  np.testing.assert_array_equal(splits["test"]["inputs"], [[pad, tokyo, pad]])
  # Each token's word as the file spells it, in the targets' order (the lookup baseline's).
  assert splits.info["words"] == {
    "train": ["I", "❤️", "東京", "naïve", "I"],
    "validation": ["I", "zzz", "@user"],
    "test": ["東京"],
  }
  assert splits["train"]["inputs"].dtype == np.int32
  assert splits["train"]["targets"].dtype == np.int32
  assert splits.info["num_classes"] == 25
  assert splits.info["embeddings"] is None


def test_twitter_files_found_by_suffix(tmp_path):
  write_ark(tmp_path / "twitter_pos", ("tweets-train.txt", "tweets-dev.txt", "tweets-test.txt"))
  splits = data.load("twitter_pos", tmp_path)
  assert len(splits["train"]["targets"]) == 5
  assert len(splits["validation"]["targets"]) == 3


def test_twitter_ambiguous_files(tmp_path):
  write_ark(tmp_path, ("a.train", "a.dev", "a.test"))
  (tmp_path / "daily547.test").write_text(TEST_ARK)
  with pytest.raises(ValueError, match=r"exactly one file whose name ends in 'test'"):
    data.load("twitter_pos", tmp_path)


def test_twitter_embeddings(tmp_path):
  write_ark(tmp_path)
  path = tmp_path / "vectors.txt"
  path.write_text("5 2\n東京\t1 2\nUUUNKKK 0.5 -0.5\n</s> 3 4\nI 5 6\n東京 7 8\n", encoding="utf-8")
  splits = data.load("twitter_pos", tmp_path, embeddings=path)
  assert splits.info["vocab"] == ["東京", "UUUNKKK", "</s>", "I"]
  np.testing.assert_array_equal(
    splits.info["embeddings"], np.array([[7, 8], [0.5, -0.5], [3, 4], [5, 6]], np.float32)
  )
  tokyo, unk, pad, i = range(4)
  np.testing.assert_array_equal(splits["train"]["inputs"][:2], [[pad, i, unk], [i, unk, tokyo]])


@pytest.mark.parametrize(
  ("text", "match"),
  [
    ("</s> 1 2\nI 1\nUUUNKKK 0 0\n", r"vectors.txt, line 2: expected a word followed by numbers"),
    ("</s> 1 2\nI 1 x\n", r"vectors.txt, line 2"),
    ("</s> 1 2\nI 1 2\n", r"vectors.txt: the embeddings must include the word 'UUUNKKK'"),
    (None, r"embeddings='.*vectors.txt': no such file"),
    ("</s> 1 2\nUUUNKKK 0.5 nan\n", r"vectors.txt, line 2: the vector of 'UUUNKKK' holds NaN"),
    ("</s> 1 2\nUUUNKKK -inf 0\n", r"vectors.txt, line 2: the vector of 'UUUNKKK' holds NaN"),
    ("</s> 1 2\nUUUNKKK 1e39 0\n", r"line 2: .* beyond float32's 3.4e\+38"),
    ("", r"vectors.txt: holds no word vectors"),
    (
      b"</s> 1 2\n\xe9t\xe9 1 2\n",
      r"vectors.txt, line 2: not UTF-8 text \(byte 0xe9 at column 1\)",
    ),
  ],
)
def test_twitter_bad_embeddings(tmp_path, text, match):
  write_ark(tmp_path)
  if isinstance(text, bytes):
    (tmp_path / "vectors.txt").write_bytes(text)
  elif text is not None:
    (tmp_path / "vectors.txt").write_text(text)
  with pytest.raises(ValueError, match=match):
    data.load("twitter_pos", tmp_path, embeddings=tmp_path / "vectors.txt")


@pytest.mark.parametrize(
  ("bad_line", "match"),
  [
    ("lol N", r"line 3: expected 'token<TAB>tag', got 'lol N'"),
    ("lol\tNN", r"line 3: unknown tag 'NN'; the 25 tags are N O S"),
    ("a\tN\tx", r"line 3: expected 'token<TAB>tag'"),
  ],
)
def test_twitter_malformed_line_names_file_and_line(tmp_path, bad_line, match):
  write_ark(tmp_path)
  path = tmp_path / "oct27.dev"
  path.write_text(f"I\tO\n\n{bad_line}\n", encoding="utf-8")
  with pytest.raises(ValueError, match=rf"{path}, {match}"):
    data.load("twitter_pos", tmp_path)


@pytest.mark.parametrize(
  ("content", "match"),
  [
    (b"", r"oct27.dev: holds no tweets"),
    (b"\n\n", r"oct27.dev: holds no tweets"),
    (b"I\tO\n\ncaf\xe9\tN\n", r"oct27.dev, line 3: not UTF-8 text \(byte 0xe9 at column 4\)"),
  ],
)
def test_twitter_empty_or_not_utf8_names_the_file(tmp_path, content, match):
  write_ark(tmp_path)
  path = tmp_path / "oct27.dev"
  path.write_bytes(content)
  with pytest.raises(ValueError, match=rf"{path}{match.removeprefix('oct27.dev')}"):
    data.load("twitter_pos", tmp_path)


def test_twitter_missing_is_one_paragraph(tmp_path):
  with pytest.raises(ValueError, match=r"'twitter_pos'.*no oct27.train.*not in TFDS.*oct27.dev"):
    data.load("twitter_pos", tmp_path)


# ----------------------------------------------------------------------------- TIMIT


def write_timit_split(path, lengths, seed, **overrides):
  rng = np.random.default_rng(seed)
  frames = sum(lengths)
  arrays = {
    "features": rng.normal(3.0, 2.0, (frames, 26)).astype(np.float32),
    "labels": rng.integers(0, 39, frames),
    "lengths": np.array(lengths),
  }
  arrays.update(overrides)
  np.savez(path, **arrays)
  return arrays


def write_timit(folder):
  folder.mkdir(parents=True, exist_ok=True)
  return {
    "train": write_timit_split(folder / "train.npz", [1, 4, 7], 1),
    "validation": write_timit_split(folder / "validation.npz", [3, 12], 2),
    "test": write_timit_split(folder / "test.npz", [6], 3),
  }


def reference_windows(utterance):
  """The authors' construction: frame t's window is frames t-5..t+5 clipped to the utterance."""
  rows = []
  for t in range(len(utterance)):
    picks = [min(max(k, 0), len(utterance) - 1) for k in range(t - 5, t + 6)]
    rows.append(np.concatenate([utterance[k] for k in picks]))
  return np.array(rows)


def test_timit_windows_and_standardisation(tmp_path):
  raw = write_timit(tmp_path / "timit")
  splits = data.load("timit", tmp_path)
  train = raw["train"]["features"].astype(np.float64)
  mean, std = train.mean(0), train.std(0)
  for split, arrays in raw.items():
    standardised = (arrays["features"] - mean) / std
    bounds = np.cumsum([0, *arrays["lengths"]])
    expected = np.concatenate(
      [reference_windows(standardised[a:b]) for a, b in itertools.pairwise(bounds)]
    )
    np.testing.assert_allclose(splits[split]["inputs"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(splits[split]["targets"], arrays["labels"])
    np.testing.assert_array_equal(
      splits[split]["groups"], np.repeat(np.arange(len(arrays["lengths"])), arrays["lengths"])
    )
    assert splits[split]["inputs"].dtype == np.float32
    assert splits[split]["targets"].dtype == np.int32
    assert splits[split]["groups"].dtype == np.int32
  np.testing.assert_allclose(splits.info["mean"], mean, rtol=1e-6)
  np.testing.assert_allclose(splits.info["std"], std, rtol=1e-6)
  assert splits.info["num_classes"] == 39
  # The one-frame utterance's window is that frame eleven times.
  np.testing.assert_allclose(
    splits["train"]["inputs"][0], np.tile((train[0] - mean) / std, 11), rtol=1e-5, atol=1e-6
  )


@pytest.mark.parametrize(
  ("overrides", "match"),
  [
    ({"labels": np.array([0, 39, 1])}, r"labels must lie in 0..38, found 0..39"),
    ({"features": np.zeros((3, 25), np.float32)}, r"features have shape \[3, 25\]; expected"),
    ({"lengths": np.array([1, 1])}, r"utterance lengths sum to 2 but there are 3 frames"),
    ({"labels": np.array([0, 1])}, r"3 feature frames but labels of shape \[2\]"),
    ({"labels": np.array([0.0, 1.0, 2.0])}, r"labels must be integers"),
  ],
)
def test_timit_malformed(tmp_path, overrides, match):
  write_timit(tmp_path)
  path = tmp_path / "validation.npz"
  base = {
    "features": np.zeros((3, 26), np.float32),
    "labels": np.array([0, 1, 2]),
    "lengths": np.array([3]),
  }
  np.savez(path, **{**base, **overrides})
  with pytest.raises(ValueError, match=rf"{path}: {match}"):
    data.load("timit", tmp_path)


def test_timit_converter_from_authors_h5(tmp_path):
  import h5py  # Only the converter needs it (dev extra), so it is not imported at the top.

  raw = write_timit(tmp_path / "reference")
  names = {"train": "train.h5", "validation": "dev.h5", "test": "core.h5"}
  (tmp_path / "h5").mkdir()
  for split, arrays in raw.items():
    lengths, total = arrays["lengths"], 15  # Utterances left-padded to 15 frames.
    x = np.full((len(lengths), total, 26), -7.0, np.float32)
    y = np.zeros((len(lengths), total), np.float32)  # The authors stored labels as floats.
    bounds = np.cumsum([0, *lengths])
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
      x[i, total - (b - a) :] = arrays["features"][a:b]
      y[i, total - (b - a) :] = arrays["labels"][a:b]
    with h5py.File(tmp_path / "h5" / names[split], "w") as f:
      f["X"], f["y"], f["start_idx"] = x, y, total - lengths
  counts = data.convert_timit_h5(tmp_path / "h5", tmp_path / "converted")
  assert counts == {"train": 3, "validation": 2, "test": 1}
  converted = data.load("timit", tmp_path / "converted")
  reference = data.load("timit", tmp_path / "reference")
  for split in raw:
    for key in ("inputs", "targets", "groups"):
      np.testing.assert_array_equal(converted[split][key], reference[split][key])


# --------------------------------------------------------------------- preprocessing


def test_scale_pixels():
  scaled = preprocessing.scale_pixels(np.array([0, 51, 255], np.uint8))
  assert scaled.dtype == np.float32
  np.testing.assert_allclose(scaled, [0.0, 0.2, 1.0], rtol=1e-7)


def test_add_uniform_noise():
  x = np.full((200_000,), 0.5, np.float32)
  noisy = preprocessing.add_uniform_noise(x, 1.5, np.random.default_rng(3))
  noise = noisy.astype(np.float64) - 0.5
  assert noisy.dtype == np.float32
  assert -1.5 <= noise.min() and noise.max() <= 1.5
  # Unif[-a, a] has mean 0 and variance a^2 / 3; tolerances are ~5 standard errors.
  assert abs(noise.mean()) < 5 * 1.5 / np.sqrt(3 * len(x))
  assert abs(noise.var() - 0.75) < 0.01
  np.testing.assert_array_equal(
    noisy, preprocessing.add_uniform_noise(x, 1.5, np.random.default_rng(3))
  )
  np.testing.assert_array_equal(
    preprocessing.add_uniform_noise(x, 0.0, np.random.default_rng(0)), x
  )
  with pytest.raises(ValueError, match="a=-1"):
    preprocessing.add_uniform_noise(x, -1, np.random.default_rng(0))


@pytest.mark.parametrize("n", [500, 9])  # more examples than the 12 features, and fewer
def test_zca_against_inverse_matrix_square_root(n):
  rng = np.random.default_rng(4)
  x = rng.normal(size=(n, 2, 2, 3)) @ rng.normal(size=(3, 3)) + 5.0
  mean, whitening = preprocessing.fit_zca(x, eps=1e-3)
  flat = x.reshape(n, -1)
  covariance = np.cov(flat, rowvar=False, bias=True)
  reference = scipy.linalg.fractional_matrix_power(covariance + 1e-3 * np.eye(12), -0.5)
  np.testing.assert_allclose(mean, flat.mean(0), rtol=1e-6)
  np.testing.assert_allclose(whitening, reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())
  white = preprocessing.apply_zca(x, mean, whitening)
  assert white.shape == x.shape and white.dtype == np.float32
  expected = (flat - flat.mean(0)) @ reference
  np.testing.assert_allclose(white.reshape(n, -1), expected, atol=1e-3 * np.abs(expected).max())


def test_zca_whitens_well_conditioned_data():
  rng = np.random.default_rng(5)
  x = rng.normal(size=(2000, 6)) @ rng.normal(size=(6, 6))
  white = preprocessing.apply_zca(x, *preprocessing.fit_zca(x, eps=1e-8)).astype(np.float64)
  np.testing.assert_allclose(np.cov(white, rowvar=False, bias=True), np.eye(6), atol=1e-4)


def test_subtract_pixel_mean():
  train = np.array([[[[0]], [[10]]], [[[4]], [[20]]]], np.uint8)  # [2, 2, 1, 1]
  test = np.array([[[[2]], [[0]]]], np.uint8)
  train_c, test_c = preprocessing.subtract_pixel_mean(train, test)
  np.testing.assert_array_equal(train_c[..., 0, 0], [[-2, -5], [2, 5]])
  np.testing.assert_array_equal(test_c[..., 0, 0], [[0, -15]])
  assert train_c.dtype == test_c.dtype == np.float32


def test_flip_double():
  images = np.array([[[[1], [2], [3]]], [[[4], [5], [6]]]], np.uint8)  # [2, 1, 3, 1]
  doubled, labels = preprocessing.flip_double(images, np.array([7, 8], np.int32))
  np.testing.assert_array_equal(
    doubled[..., 0], [[[1, 2, 3]], [[4, 5, 6]], [[3, 2, 1]], [[6, 5, 4]]]
  )
  np.testing.assert_array_equal(labels, [7, 8, 7, 8])
  assert doubled.dtype == np.uint8


# ------------------------------------------------------------ real Fashion-MNIST


def test_real_fashion_mnist_from_debian_package():
  folder = mnist.DEBIAN_FASHION_MNIST
  assert folder.is_dir(), (
    f"{folder} is missing: install the Debian package dataset-fashion-mnist "
    "(scripts/install.sh does), which the paper's Fashion-MNIST results are trained on."
  )
  splits = data.load("fashion_mnist")
  assert splits.info["source"] == f"IDX files in {folder}"
  assert {k: len(v["targets"]) for k, v in splits.items()} == {
    "train": 55_000,
    "validation": 5_000,
    "test": 10_000,
  }
  assert splits["train"]["inputs"].shape[1:] == (28, 28, 1)
  # Known facts of the dataset: 6,000 per class in the train file, 1,000 in test.
  train_file = np.concatenate([splits["validation"]["targets"], splits["train"]["targets"]])
  np.testing.assert_array_equal(np.bincount(train_file), [6000] * 10)
  np.testing.assert_array_equal(np.bincount(splits["test"]["targets"]), [1000] * 10)
  # The first train-file labels (ankle boot, T-shirt, ...) and test labels, in file order.
  np.testing.assert_array_equal(train_file[:10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5])
  np.testing.assert_array_equal(splits["test"]["targets"][:10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7])
  # A second reader: the image file's pixels sit after a 16-byte header.
  with gzip.open(folder / "train-images-idx3-ubyte.gz") as f:
    pixels = np.frombuffer(f.read(), np.uint8, offset=16).reshape(60_000, 28, 28)
  np.testing.assert_array_equal(splits["validation"]["inputs"][..., 0], pixels[:5000])
  np.testing.assert_array_equal(splits["train"]["inputs"][-1, ..., 0], pixels[-1])


def test_tfds_without_a_prepared_copy_says_what_to_do_and_downloads_nothing(tmp_path, capfd):
  """No mock: the real TFDS, asked for a data set it has no copy of (as on a new machine)."""
  with pytest.raises(ValueError) as error:
    data.load("cifar10", tmp_path)
  message = str(error.value)
  assert f"TFDS 'cifar10' (data_dir {tmp_path}) (no prepared copy)" in message
  assert "Pass `data_dir` pointing at a folder holding cifar-10-batches-py/" in message
  assert "ModuleNotFoundError" not in message
  out, err = capfd.readouterr()
  assert "Downloading" not in out + err and "dataset_info.json" not in out + err
  assert os.listdir(tmp_path) == []  # nothing prepared, nothing downloaded
