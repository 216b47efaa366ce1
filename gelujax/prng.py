"""Random streams: keys folded from (seed, stream, epoch, step), and cheap dropout bits.

Every random draw of a run comes from ``fold_key(seed, stream, epoch, step)`` (threefry), so a
resumed run draws exactly what an uninterrupted one would. Dropout needs one random word per
hidden unit per example per step, which on a CPU costs more than the layer's arithmetic when
drawn with threefry's twenty rounds; `make_dropout_key` therefore turns the step's threefry key
into a key of ``HASH_PRNG``, a keyed integer hash of a counter, used for dropout masks only.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.extend
import jax.numpy as jnp

# Random streams, folded into a member's key before (epoch, step).
INIT, SHUFFLE, STEP = 0, 1, 2
# Where dropout masks come from: the hash below, or the step's threefry key itself.
DROPOUT_BITS = ("hash", "threefry")


def fold_key(seed: jax.Array, *path: int | jax.Array) -> jax.Array:
  """The threefry key of ``seed`` folded with ``path`` (stream, epoch, step)."""
  key = jax.random.key(seed)
  for part in path:
    key = jax.random.fold_in(key, part)
  return key


def _mix(x: jax.Array) -> jax.Array:
  """MurmurHash3's 32-bit finalizer: a bijection in which every input bit flips ~half the
  output bits."""
  x = (x ^ (x >> 16)) * jnp.uint32(0x85EBCA6B)
  x = (x ^ (x >> 13)) * jnp.uint32(0xC2B2AE35)
  return x ^ (x >> 16)


def _seed_hash_key(seed: jax.Array) -> jax.Array:
  seed = jnp.asarray(seed).astype(jnp.uint32)
  return jnp.stack([_mix(seed ^ jnp.uint32(0x243F6A88)), _mix(seed + jnp.uint32(0x13198A2E))])


def _fold_in_hash_key(key: jax.Array, data: jax.Array) -> jax.Array:
  data = jnp.asarray(data).astype(jnp.uint32)
  return jnp.stack([_mix(key[0] ^ _mix(data + key[1])), _mix(key[1] + _mix(data ^ key[0]))])


def _split_hash_key(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  counters = jnp.arange(math.prod(shape), dtype=jnp.uint32)
  return jax.vmap(functools.partial(_fold_in_hash_key, key))(counters).reshape(*shape, 2)


def _hash_random_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
  if bit_width > 32:
    raise ValueError(f"The dropout key draws at most 32-bit words, not {bit_width}-bit ones.")
  counters = jax.lax.iota(jnp.uint32, math.prod(shape))
  bits = _mix(_mix(counters * jnp.uint32(0x9E3779B9) + key[0]) ^ key[1])
  return (bits >> (32 - bit_width)).astype(f"uint{bit_width}").reshape(shape)


# Random bits as a keyed hash of a counter: a few integer operations per word where threefry
# needs twenty rounds, and, unlike RBG keys (whose vmapped draws all come from the first key in
# jax 0.10), each member's bits depend on its own key only.
HASH_PRNG = jax.extend.random.define_prng_impl(
  key_shape=(2,),
  seed=_seed_hash_key,
  split=_split_hash_key,
  random_bits=_hash_random_bits,
  fold_in=_fold_in_hash_key,
  name="gelujax_hash32",
)


def make_dropout_key(key: jax.Array, bits: str = "hash") -> jax.Array:
  """The key of the model's ``'dropout'`` stream, from a step's threefry ``key``.

  Args:
    key: the step's threefry key.
    bits: ``"hash"``: a ``HASH_PRNG`` key whose two words are drawn from ``key`` (masks stay a
      deterministic function of (seed, epoch, step)); ``"threefry"``: ``key`` itself.
  """
  if bits == "threefry":
    return key
  if bits != "hash":
    raise ValueError(f"Dropout bits {bits!r} are unknown; valid: {', '.join(DROPOUT_BITS)}.")
  return jax.random.wrap_key_data(jax.random.bits(key, (2,), jnp.uint32), impl=HASH_PRNG)
