"""Twitter POS's spelling-aware substitute: gelujax.spelling's features against hand-made
ones, the spelled EmbeddingMLP against a NumPy float64 forward pass, word dropout, and the whole
path through experiments/train.py on ARK-format files."""

import binascii
import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest
from jitted import init
from test_twitter_embeddings import (
  ROOT,
  VOCAB_SIZE,
  np_gelu_tanh,
  np_layers,
  train_one_epoch,
  write_tweets,
)

from gelujax import spelling, tasks
from gelujax.models import MODELS

ROOT_PATH = Path(ROOT)
SPELLED = "twitter_pos(model='spelling_mlp_twitter_pos', preprocessing=('spell_words',))"
FLAG_NAMES = [name for name, _ in spelling.FLAGS]


def test_char_ngrams_by_hand():
  # "<ab>": the word; prefixes <a, <ab; suffixes b>, ab>; inner a, b, ab.
  assert spelling.char_ngrams("Ab") == ["<ab>", "<a", "<ab", "b>", "ab>", "a", "b", "ab"]
  assert spelling.char_ngrams("x") == ["<x>", "<x", "x>", "x"]
  # A long word keeps its ends: every suffix is kept before the inner n-grams are cut.
  long = spelling.char_ngrams("unbelievably", max_ngrams=12)
  assert len(long) == 12 and {"y>", "ly>", "bly>", "ably>"} <= set(long)
  assert spelling.bucket("<ab") == binascii.crc32(b"<ab") % spelling.BUCKETS
  assert spelling.bucket("é") == binascii.crc32("é".encode()) % spelling.BUCKETS


@pytest.mark.parametrize(
  ("word", "flags"),
  [
    ("Obama", ["capitalised"]),
    ("LOL", ["capitalised", "all capitals"]),
    ("@user_1", ["has a digit", "@mention"]),
    ("#tbt", ["#hashtag"]),
    ("http://t.co/x1", ["has a digit", "URL"]),
    ("bit.ly/abc", ["URL"]),
    ("3:45", ["has a digit", "a number"]),
    (":)", ["no letter or digit", "emoticon"]),
    (";-P", ["emoticon", "hyphen or apostrophe"]),
    ("<3", ["has a digit", "emoticon"]),
    ("don't", ["hyphen or apostrophe"]),
    ("naïve", ["non-ASCII"]),
    ("!!!", ["no letter or digit"]),
    ("the", []),
  ],
)
def test_word_shape_by_hand(word, flags):
  got = [name for name, on in zip(FLAG_NAMES, spelling.word_shape(word), strict=True) if on]
  assert got == flags


def test_spell_words_lays_out_each_windows_neighbours(tmp_path):
  write_tweets(tmp_path)
  spec = tasks.get(SPELLED)
  splits = spec.load_data(str(tmp_path))
  x = splits["train"]["inputs"]
  k = spelling.MAX_NGRAMS
  assert x.shape == (5, 3, 1 + k + len(spelling.FLAGS)) and x.dtype == np.int32
  # Tweets "lol the cat" and "the the": the second token's window is lol | the | cat, the
  # fourth's </s> | the | the.
  words = ["lol", "the", "cat"]
  for j, word in enumerate(words):
    expected = spelling.spell_word(word, pad="</s>")
    np.testing.assert_array_equal(x[1, j, 1:], expected)
  assert (x[3, 0, 1 : 1 + k] == -1).all() and not x[3, 0, 1 + k :].any()  # </s>: nothing
  np.testing.assert_array_equal(x[3, 1, 1:], x[3, 2, 1:])
  # An unseen word (dev's zzz) is UUUNKKK's id with its own spelling.
  v = splits["validation"]["inputs"]
  assert v[1, 1, 0] == 1
  np.testing.assert_array_equal(v[1, 1, 1:], spelling.spell_word("zzz", pad="</s>"))
  assert tasks.build(spec, splits).model.vocab_size == VOCAB_SIZE
  splits["test"]["inputs"][0, 1, 0] = VOCAB_SIZE
  with pytest.raises(ValueError, match=r"split 'test' holds word id 5, outside the vocabulary"):
    tasks.build(spec, splits)


def random_spelled(rng, n, vocab, buckets):
  k, f = spelling.MAX_NGRAMS, len(spelling.FLAGS)
  ids = rng.integers(0, vocab, (n, 3, 1 + k + f))
  ngrams = rng.integers(0, buckets, (n, 3, k))
  ngrams[rng.random((n, 3, k)) < 0.4] = -1
  ids[..., 1 : 1 + k] = ngrams
  ids[..., 1 + k :] = rng.integers(0, 2, (n, 3, f))
  return ids.astype(np.int32)


def np_spelled_embedding(params, ids, use_flags=True):
  """Each word's vector, [B, W, embed_dim] in float64: its row, the mean of its n-grams' rows
  (none for -1), the map of its flags."""
  k = spelling.MAX_NGRAMS
  table = np.asarray(params["embedding"], np.float64)
  ngram_table = np.asarray(params["ngrams"], np.float64)
  x = table[ids[..., 0]]
  for i in np.ndindex(*ids.shape[:2]):
    rows = [ngram_table[r] for r in ids[i][1 : 1 + k] if r >= 0]
    if rows:
      x[i] += np.mean(rows, axis=0)
    if use_flags:
      x[i] += ids[i][1 + k :] @ np.asarray(params["flags"]["kernel"], np.float64)
  return x


def np_spelled_forward(params, ids, use_flags=True):
  h = np_spelled_embedding(params, ids, use_flags).reshape(len(ids), -1)
  layers = np_layers(params)
  for kernel, bias in layers[:-1]:
    h = np_gelu_tanh(h @ kernel + bias)
  kernel, bias = layers[-1]
  return h @ kernel + bias


@pytest.mark.parametrize("use_flags", [True, False])
def test_spelled_forward_matches_numpy_float64(use_flags):
  model = MODELS.get("spelling_mlp_twitter_pos")(vocab_size=40, buckets=64, use_flags=use_flags)
  ids = random_spelled(np.random.default_rng(2), 5, 40, 64)
  params = init(model, ids, 0)["params"]
  assert params["ngrams"].shape == (64, 50)
  assert ("flags" in params) == use_flags
  leaves, tree = jax.tree_util.tree_flatten(params)  # shifted: zeros cannot hide a term
  params = tree.unflatten([leaf + 0.05 * (i + 1) for i, leaf in enumerate(leaves)])
  out = model.apply({"params": params}, ids, train=False)
  np.testing.assert_allclose(out, np_spelled_forward(params, ids, use_flags), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_word_dropout_replaces_words_by_the_unknown_one_in_training_only():
  rng = np.random.default_rng(3)
  ids = random_spelled(rng, 6, 40, 64)
  ids[0, 0, 0] = 0  # </s> is kept
  model = MODELS.get("spelling_mlp_twitter_pos")(vocab_size=40, buckets=64, word_dropout=1.0)
  params = init(model, ids, 0)["params"]
  rngs = {"dropout": jax.random.key(1)}
  trained = model.apply({"params": params}, ids, train=True, rngs=rngs)
  unknown = ids.copy()
  unknown[..., 0] = np.where(ids[..., 0] == 0, 0, 1)
  np.testing.assert_allclose(trained, np_spelled_forward(params, unknown), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(
    model.apply({"params": params}, ids, train=False), np_spelled_forward(params, ids),
    rtol=1e-4, atol=1e-4,
  )  # fmt: skip
  # At rate 0.25 about a quarter of the words are replaced.
  quarter = model.clone(word_dropout=0.25)
  many = random_spelled(rng, 2000, 40, 64)
  many[..., 0] = rng.integers(2, 40, many.shape[:2])
  mixed = quarter.apply({"params": params}, many, train=True, rngs=rngs)
  as_unknown = quarter.apply(
    {"params": params}, np.concatenate([many[..., :1] * 0 + 1, many[..., 1:]], -1), train=False
  )
  # Per window, its centre word is replaced exactly where those outputs agree: a fraction of
  # about 0.25^3 (all three replaced), which a wrong rate would miss.
  same = np.isclose(np.asarray(mixed), np.asarray(as_unknown), atol=1e-6).all(axis=1).mean()
  assert abs(same - 0.25**3) < 0.01


@pytest.mark.e2e
def test_train_py_trains_the_spelled_model_one_epoch(tmp_path):
  _, workdir = train_one_epoch(tmp_path, f"{SPELLED[:-1]}, model_options={{'word_dropout': 0.25}})")
  config = json.loads((workdir / "config.json").read_text())
  assert config["spec"]["model"] == "spelling_mlp_twitter_pos"
  assert config["spec"]["model_options"] == {"word_dropout": 0.25}
  (line,) = (workdir / "metrics.jsonl").read_text().splitlines()
  record = json.loads(line)
  assert all(math.isfinite(v) for k, v in record.items() if k.endswith("_loss"))
  assert record["validation_error"] < 0.5  # learnable: each word has one tag


def test_the_data_page_states_the_features_as_built():
  text = " ".join((ROOT_PATH / "docs" / "data.md").read_text().split())
  kept, rows = spelling.MAX_NGRAMS, spelling.BUCKETS
  assert f"(prefixes and suffixes first, at most {kept}, hashed by CRC-32 into {rows} rows)" in text
  assert f"and {len(spelling.FLAGS)} yes/no shape flags" in text
  sizes = spelling.NGRAM_SIZES
  assert f"character n-grams of {sizes[0]} to {sizes[-1]} letters" in text
