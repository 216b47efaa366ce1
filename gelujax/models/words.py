"""Models that embed word ids themselves: :class:`EmbeddingMLP` (a trainable table, and with
``buckets`` each word's spelling, then an :class:`~gelujax.models.MLP`), and
:func:`embed_words`, a word's vector as every model that reads words makes it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from gelujax import spelling
from gelujax.activations import gelu_tanh
from gelujax.models.mlp import MLP


class EmbeddingMLP(nn.Module):
  """Integer word ids embedded by a trainable table, concatenated, then an :class:`MLP`.

  ``[B, W]`` ids -> ``[B, W, embed_dim]`` rows of the table -> ``[B, W·embed_dim]`` -> the MLP.
  The table (parameter ``embedding``, ``[vocab_size, embed_dim]``) is initialised N(0, 1), the
  distribution of the task's frozen substitute, drawn from each member's own key; the MLP's
  dense layers are the paper's (unit-norm columns, zero biases). An id outside
  ``[0, vocab_size)`` gives NaN outputs, never another word's row (the trainer then reports the
  member as diverged); ``gelujax.tasks.build`` rejects such data before training.

  With ``buckets`` > 0 the model also reads each word's spelling (:mod:`gelujax.spelling`):
  its inputs are ``[B, W, 1 + K + F]``, the word id, K hashed character n-gram rows (-1 for
  none) and F shape flags, and a word's vector is its table row plus the mean of its n-grams'
  rows of a second table (``ngrams``, ``[buckets, embed_dim]``, N(0, 1)) plus, with
  ``use_flags``, a linear map of its flags (``flags``, zero-initialised, no bias).

  Attributes:
    features: widths of the MLP's hidden layers.
    num_outputs: width of the linear output layer.
    vocab_size: rows of the table; 0 until set from the data (``gelujax.tasks.build``).
    embed_dim: width of a word's vector.
    activation: the activation, applied after every hidden dense layer.
    dropout: drop rate after every hidden activation (never on the embeddings).
    dtype: the type the layers and activations compute in (parameters stay float32).
    buckets: rows of the n-gram table; 0: word ids alone.
    use_flags: with ``buckets``, whether the shape flags add to a word's vector.
    word_dropout: in training, the probability that a word's id is replaced by
      ``unknown_id`` (``</s>`` padding, id 0, is kept), so that the model learns to tag a word
      from its spelling alone, as it must for a word unseen in training.
    unknown_id: the id of ``UUUNKKK`` (1 in the data's vocabulary).
  """

  features: Sequence[int]
  num_outputs: int
  vocab_size: int = 0
  embed_dim: int = 50
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  buckets: int = 0
  use_flags: bool = True
  word_dropout: float = 0.0
  unknown_id: int = 1

  @nn.compact
  def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
    if not jnp.issubdtype(ids.dtype, jnp.integer) or ids.ndim != (3 if self.buckets else 2):
      want = "[batch, words, 1 + n-grams + flags] (the 'spell_words' step)" if self.buckets else (
        "[batch, words]"
      )  # fmt: skip
      raise ValueError(
        f"EmbeddingMLP(buckets={self.buckets}) takes integer word ids {want}, got {ids.dtype} "
        f"inputs of shape {list(ids.shape)} (already embedded? leave out the host-side "
        "'embed_words' step)."
      )
    x = embed_words(self, ids, train).reshape(ids.shape[0], -1)
    mlp = MLP(self.features, self.num_outputs, self.activation, self.dropout, self.dtype)
    return mlp(x, train)


def embed_words(module: nn.Module, ids: jax.Array, train: bool) -> jax.Array:
  """Each word's vector, ``[B, W, embed_dim]``, as :class:`EmbeddingMLP` embeds it: its row of
  the table ``embedding`` plus, with ``buckets``, the mean of its n-grams' rows of ``ngrams`` and
  (``use_flags``) the map ``flags`` of its shape flags; in training, ``word_dropout``.

  Called inside ``module``'s compact ``__call__``, whose parameters these are (the same names in
  every model that reads words); it reads the module's fields ``vocab_size``, ``embed_dim``,
  ``buckets``, ``use_flags``, ``word_dropout`` and ``unknown_id``. ``ids`` are ``[B, W]`` word
  ids, or ``[B, W, 1 + K + F]`` with ``buckets`` (the ``spell_words`` step's layout).
  """
  if module.vocab_size < 1:
    raise ValueError(
      f"{type(module).__name__} vocab_size={module.vocab_size!r}: the table needs the "
      "vocabulary's size, which comes from the data: build the model from "
      "gelujax.tasks.build(spec, splits)."
    )
  words = ids[..., 0] if module.buckets else ids
  if train and module.word_dropout > 0:
    dropped = jax.random.bernoulli(module.make_rng("dropout"), module.word_dropout, words.shape)
    words = jnp.where(dropped & (words != 0), module.unknown_id, words)
  table = module.param(
    "embedding", nn.initializers.normal(1.0), (module.vocab_size, module.embed_dim)
  )
  x = _lookup(table, words)
  if module.buckets:
    ngrams, flags = (
      ids[..., 1 : ids.shape[-1] - len(spelling.FLAGS)],
      ids[..., ids.shape[-1] - len(spelling.FLAGS) :],
    )
    table = module.param("ngrams", nn.initializers.normal(1.0), (module.buckets, module.embed_dim))
    present = ngrams >= 0
    rows = jnp.take(table, jnp.where(present, ngrams, 0), axis=0)
    count = jnp.maximum(present.sum(-1, keepdims=True), 1)
    x = x + (rows * present[..., None]).sum(-2) / count
    if module.use_flags:
      x = x + nn.Dense(
        module.embed_dim, use_bias=False, kernel_init=nn.initializers.zeros, name="flags"
      )(flags.astype(jnp.float32))
  return x


def _lookup(table: jax.Array, ids: jax.Array) -> jax.Array:
  """Rows of ``table``; NaN for an id outside it (jnp.take alone would wrap a negative id to a
  row from the end, or clamp a large one)."""
  inside = (ids >= 0) & (ids < table.shape[0])
  return jnp.where(inside[..., None], jnp.take(table, ids, axis=0, mode="clip"), jnp.nan)
