"""Decisive checks of the dropout PRNG (gelujax.engine's hash) on the trainer's own key path.

The keys and the masks of the MNIST classifier's Dropout layers are drawn as benchmarks/prng.py
draws them (``dropout_keys``, ``draw_masks``). Each statistic is computed here in NumPy from the
bits and masks, and is N(0, 1) for independent fair bits; a check fails at |z| > 5 (chance:
about 6e-7 per z-score). Each check is also run on a deliberately broken generator to show that
it would fail on a bad hash. The full measurement against threefry is benchmarks/prng.py
(benchmarks/results/prng.md).
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import prng
from gelujax.prng import make_dropout_key

LIMIT = 5.0


def dropout_keys(seeds, epochs, steps):
  """The hash keys the trainer's steps draw dropout masks from, [seeds, epochs, steps]."""
  keys = prng.dropout_keys(seeds, epochs, steps)
  return jax.vmap(make_dropout_key)(keys.reshape(-1)).reshape(keys.shape)


def bits_of(words):
  """uint32 words -> [..., 32] bits, most significant first."""
  return np.unpackbits(np.asarray(words, ">u4").view(np.uint8).reshape(*np.shape(words), 4), -1)


def frequency_z(words):
  """Per bit position: the z-score of its count of ones."""
  bits = bits_of(words).reshape(-1, 32)
  return (bits.sum(0) - len(bits) / 2) / np.sqrt(len(bits) / 4)


def agreement_z(a, b):
  """Per bit position: the z-score of how often words a and b agree in it."""
  same = (bits_of(a) == bits_of(b)).reshape(-1, 32)
  return (same.sum(0) - len(same) / 2) / np.sqrt(len(same) / 4)


def mask_agreement_z(a, b):
  """The z-score of how often two boolean masks of one shape agree."""
  return ((a == b).sum() - a.size / 2) / np.sqrt(a.size / 4)


@pytest.fixture(scope="module")
def words():
  """4,096 words of each of 16 trainer keys (seeds 0-3 x steps 0-3 of epoch 1), [16, 4096]."""
  keys = dropout_keys(4, 1, 4).reshape(-1)
  return np.asarray(jax.vmap(lambda k: jax.random.bits(k, (4096,), jnp.uint32))(keys))


@pytest.fixture(scope="module")
def masks():
  """Masks of seeds 0-2 x epochs 1-2 x steps 0-1: [3, 2, 2, 8, 128, 128]."""
  return prng.draw_masks(dropout_keys(3, 2, 2).reshape(-1)).reshape(3, 2, 2, 8, 128, 128)


def weyl(n):
  """A broken generator: a counter times an odd constant, no mixing."""
  return (np.arange(n, dtype=np.uint64) * 0x9E3779B9 + 12345).astype(np.uint32)


def test_every_bit_position_is_fair(words):
  assert np.abs(frequency_z(words)).max() < LIMIT
  assert np.abs(frequency_z(words | np.uint32(1))).max() > 100  # A stuck bit.


@pytest.mark.parametrize("lag", [1, 2, 128])
def test_words_along_the_counter_are_independent(words, lag):
  assert np.abs(agreement_z(words[:, :-lag], words[:, lag:])).max() < LIMIT
  broken = weyl(words.size).reshape(words.shape)
  assert np.abs(agreement_z(broken[:, :-lag], broken[:, lag:])).max() > 100


def test_streams_of_adjacent_keys_are_independent(words):
  # Keys are seed-major: rows 0-3 are seed 0's steps 0-3. Adjacent steps, then adjacent seeds.
  steps = words.reshape(4, 4, -1)
  assert np.abs(agreement_z(steps[:, :-1], steps[:, 1:])).max() < LIMIT
  assert np.abs(agreement_z(steps[:-1], steps[1:])).max() < LIMIT


def test_masks_keep_half_the_units(masks):
  assert abs(mask_agreement_z(masks, np.ones_like(masks))) < LIMIT


@pytest.mark.parametrize(
  ("axis", "name"), [(0, "seeds"), (1, "epochs"), (2, "steps"), (3, "layers"), (4, "examples")]
)
def test_masks_of_neighbours_are_independent(masks, axis, name):
  n = masks.shape[axis]
  a, b = np.take(masks, range(n - 1), axis), np.take(masks, range(1, n), axis)
  assert abs(mask_agreement_z(a, b)) < LIMIT, name


def test_the_mask_check_fails_when_layers_share_a_mask(masks):
  # What a fold_in that ignores the layer would give: every layer the first layer's mask.
  shared = np.broadcast_to(masks[..., :1, :, :], masks.shape)
  assert mask_agreement_z(shared[..., :-1, :, :], shared[..., 1:, :, :]) > 100


@pytest.mark.slow
def test_prng_benchmark_passes_the_hash_and_fails_the_controls(tmp_path, monkeypatch):
  """benchmarks/prng.py --quick, run in this process: its key and mask functions are the ones
  the checks above draw with, compiled once."""
  output = ["--output-dir", str(tmp_path)]
  monkeypatch.setattr(sys, "argv", ["benchmarks/prng.py", "--quick", *output])
  prng.main()
  result = json.loads((tmp_path / "prng.json").read_text())
  for name, generator in result["generators"].items():  # every statistic measured something
    assert all(0 <= s["p"] <= 1 and s["z_scores"] > 0 for s in generator["stats"].values()), name
  verdicts = result["verdicts"]
  assert verdicts["hash (gelujax)"].startswith("passes every statistic")
  assert verdicts["threefry (JAX default)"].startswith("passes every statistic")
  assert "masks: adjacent layers" in verdicts["control: hash, fold_in ignores data"]
  assert "serial correlation of words, lag 1" in verdicts["control: weyl, no mixing"]
  assert "python benchmarks/prng.py --quick" in (tmp_path / "prng.md").read_text()


def test_dropout_bits_are_uniform_and_each_members_own():
  key = make_dropout_key(jax.random.key(0))
  u = np.asarray(jax.random.uniform(key, (200_000,)), np.float64)
  # A uniform sample of this size: mean within ~4.5 sigma of 1/2, variance near 1/12.
  assert abs(u.mean() - 0.5) < 4.5 * np.sqrt(1 / 12 / len(u))
  assert abs(u.var() - 1 / 12) < 1e-3
  assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01
  counts = np.histogram(u, bins=16, range=(0, 1))[0]
  assert np.all(np.abs(counts - len(u) / 16) < 5 * np.sqrt(len(u) / 16))
  # Vmapped over members, member m's mask is what its own key draws alone.
  n = 100_000
  keys = jax.vmap(lambda s: make_dropout_key(jax.random.key(s)))(np.arange(3))
  masks = np.asarray(jax.vmap(lambda k: jax.random.bernoulli(k, 0.75, (n,)))(keys))
  for seed in range(3):
    alone = jax.random.bernoulli(make_dropout_key(jax.random.key(seed)), 0.75, (n,))
    np.testing.assert_array_equal(masks[seed], alone)
  # Binomial z-scores: the keep fraction of 3n draws is 0.75 (standard deviation 0.0008), and
  # two members' independent masks agree where both keep or both drop, 0.75² + 0.25² = 0.625
  # of the time (standard deviation 0.0015 for n draws).
  assert abs((masks.mean() - 0.75) / np.sqrt(0.75 * 0.25 / masks.size)) < LIMIT
  for a, b in ((0, 1), (0, 2), (1, 2)):
    agree = (masks[a] == masks[b]).mean()
    assert abs((agree - 0.625) / np.sqrt(0.625 * 0.375 / n)) < LIMIT, (a, b)
