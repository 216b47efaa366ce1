"""The transformers, each its feed-forward's activation or gated linear unit taken as the
other models take theirs: :class:`ViT` (images), :class:`TransformerTagger` (a tag per token
of a tweet) and :class:`CharGPT` (the next character)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from gelujax.activations import gelu_tanh
from gelujax.linen import Encoder
from gelujax.models.words import embed_words


class ViT(nn.Module):
  """A small Vision Transformer (Dosovitskiy et al., 2021) for 28x28 or 32x32 images.

  The image is cut into ``patch_size`` x ``patch_size`` patches, each flattened and mapped by
  one dense layer to ``width`` features (a reshape and a matrix product, no convolution, so the
  engine's member rule treats it as the dense model it is), plus a learned position embedding
  per patch; then :class:`gelujax.linen.Encoder` (``depth`` pre-LayerNorm blocks, ``num_heads``
  heads, a feed-forward of ``hidden_features``, gated at the same parameter count when the
  activation is a gated linear unit such as ``geglu``), the mean over patches, and a linear
  classifier. *(choice)* Mean pooling rather than a class token, as in Beyer et al. (2022,
  *Better plain ViT baselines*); no dropout on the attention weights.

  Attributes:
    num_classes: logits.
    patch_size: a patch's side in pixels; it must divide the image's sides.
    width: features of a token.
    depth: encoder blocks.
    num_heads: attention heads (dividing ``width``).
    hidden_features: the plain feed-forward's hidden width.
    activation: the feed-forward's activation.
    dropout: drop rate on both residual branches of every block.
    dtype: the type the layers compute in (parameters stay float32).
  """

  num_classes: int = 10
  patch_size: int = 4
  width: int = 64
  depth: int = 4
  num_heads: int = 4
  hidden_features: int = 256
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  # Its feed-forward takes a gated linear unit (`TaskSpec` refuses one for other models).
  takes_gated_units: ClassVar[bool] = True

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    batch, height, width, channels = x.shape
    p = self.patch_size
    if height % p or width % p:
      raise ValueError(
        f"ViT patch_size={p} does not divide the {height}x{width} images; pick a divisor of both."
      )
    rows, cols = height // p, width // p
    x = x.reshape(batch, rows, p, cols, p, channels).transpose(0, 1, 3, 2, 4, 5)
    x = x.reshape(batch, rows * cols, p * p * channels)
    x = nn.Dense(self.width, dtype=self.dtype, name="embed")(x)
    position = self.param(
      "position", nn.initializers.normal(0.02), (1, rows * cols, self.width), jnp.float32
    )
    x = x + position.astype(x.dtype)
    x = Encoder(
      num_layers=self.depth,
      num_heads=self.num_heads,
      hidden_features=self.hidden_features,
      activation=self.activation,
      dropout=self.dropout,
      dtype=self.dtype,
      name="encoder",
    )(x, deterministic=not train)
    return nn.Dense(self.num_classes, dtype=self.dtype, name="head")(x.mean(axis=1))


# A token position beyond a tweet's end (`TransformerTagger`; the ``group_tweets`` step's).
PADDING_ID = -1


class TransformerTagger(nn.Module):
  """A tagger that reads the whole tweet: a tag for every token, from all the tweet's tokens.

  Its inputs are tweets of ``L`` tokens (the ``group_tweets`` step's layout): ``[B, L, 1 + K +
  F]`` with ``buckets`` (each token's word id, n-gram rows and shape flags, the window model's
  features of its centre word) or ``[B, L]`` word ids, the id -1 beyond a tweet's end. A token's
  vector is the spelling model's (:func:`embed_words`: its table row, the mean of its n-grams'
  rows, the map of its flags; ``word_dropout`` in training), mapped by a dense layer
  (``project``) to ``width`` features, plus a learned position embedding (``position``, one per
  position of the ``L``, N(0, 0.02) as in :class:`ViT`); then :class:`gelujax.linen.Encoder`
  (``depth`` pre-LayerNorm blocks, its final LayerNorm included) with the padding mask (id -1),
  so that no padded position is attended to or changes a real token's output; then a dense
  layer to ``num_classes`` logits per token (``head``): ``[B, L, num_classes]``, those of padded
  positions meaningless (the ``token_classification`` objective leaves them out). The
  feed-forward takes any activation, or a gated linear unit (``--activation=geglu``) at the
  plain block's parameter count. An id below -1 or beyond the table gives NaN, as in
  :class:`EmbeddingMLP`.

  Attributes:
    num_classes: tags (logits per token).
    width: features of a token in the encoder.
    depth: encoder blocks.
    num_heads: attention heads (dividing ``width``).
    hidden_features: the plain feed-forward's hidden width.
    vocab_size: rows of the word table; 0 until set from the data (``gelujax.tasks.build``).
    embed_dim: width of a word's vector, before ``project``.
    buckets: rows of the n-gram table; 0: word ids alone.
    use_flags: with ``buckets``, whether the shape flags add to a word's vector.
    word_dropout: in training, the probability that a token's word id is replaced by
      ``unknown_id``.
    unknown_id: the id of ``UUUNKKK``.
    activation: the feed-forward's activation or gated linear unit.
    dropout: drop rate on both residual branches of every block.
    dtype: the type the dense layers and the encoder compute in (parameters stay float32).
  """

  num_classes: int = 25
  width: int = 64
  depth: int = 2
  num_heads: int = 4
  hidden_features: int = 256
  vocab_size: int = 0
  embed_dim: int = 50
  buckets: int = 0
  use_flags: bool = True
  word_dropout: float = 0.0
  unknown_id: int = 1
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  # Its feed-forward takes a gated linear unit (`TaskSpec` refuses one for other models).
  takes_gated_units: ClassVar[bool] = True

  @nn.compact
  def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
    if not jnp.issubdtype(ids.dtype, jnp.integer) or ids.ndim != (3 if self.buckets else 2):
      want = "[tweets, tokens, 1 + n-grams + flags]" if self.buckets else "[tweets, tokens]"
      raise ValueError(
        f"TransformerTagger(buckets={self.buckets}) takes integer word ids {want} (the "
        f"'spell_words' then 'group_tweets' steps), got {ids.dtype} inputs of shape "
        f"{list(ids.shape)}."
      )
    ids = jnp.asarray(ids)
    words = ids[..., 0] if self.buckets else ids
    real = words != PADDING_ID
    # A padded position reads the row of </s> (id 0), kept by word dropout: the mask hides it.
    words = jnp.where(real, words, 0)
    x = embed_words(self, ids.at[..., 0].set(words) if self.buckets else words, train)
    x = nn.Dense(self.width, dtype=self.dtype, name="project")(x)
    position = self.param(
      "position", nn.initializers.normal(0.02), (1, ids.shape[1], self.width), jnp.float32
    )
    x = x + position.astype(x.dtype)
    x = Encoder(
      num_layers=self.depth,
      num_heads=self.num_heads,
      hidden_features=self.hidden_features,
      activation=self.activation,
      dropout=self.dropout,
      dtype=self.dtype,
      name="encoder",
    )(x, real, deterministic=not train)
    return nn.Dense(self.num_classes, dtype=self.dtype, name="head")(x)


class CharGPT(nn.Module):
  """A character-level GPT: a decoder-only transformer that predicts each next character.

  Its inputs are windows of character ids ``[B, L]`` (any integer type). A character's vector
  is its row of the table ``embed`` (``vocab_size`` x ``width``, N(0, 0.02) as in GPT-2) plus a
  learned position embedding (``position``, one per position of the ``L``, N(0, 0.02)); then
  :class:`gelujax.linen.Encoder` with ``causal=True`` (``depth`` pre-LayerNorm blocks, each
  position attending only to itself and the positions before it, and the final LayerNorm);
  then the logits of the next character, ``[B, L, vocab_size]``, from the same table: the
  output head is **tied** to the embedding (``embed.attend``), as in GPT-2 and nanoGPT. The
  feed-forward takes any activation, or a gated linear unit at the plain block's parameter
  count. *(choice)* gelujax's blocks keep Flax's biases and initializers in the attention and
  feed-forward layers, where nanoGPT drops the biases and scales its residual projections'
  initial weights by ``1/sqrt(2 depth)``.

  Attributes:
    vocab_size: the characters (rows of the table); 0 until set from the data
      (``gelujax.tasks.build``).
    width: features of a position.
    depth: decoder blocks.
    num_heads: attention heads (dividing ``width``).
    hidden_features: the plain feed-forward's hidden width (``4 * width`` in GPT).
    activation: the feed-forward's activation or gated linear unit.
    dropout: drop rate on both residual branches of every block and on the embedding.
    dtype: the type the blocks compute in (parameters stay float32; the logits are computed
      in float32).
  """

  vocab_size: int = 0
  width: int = 128
  depth: int = 4
  num_heads: int = 4
  hidden_features: int = 512
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  takes_gated_units: ClassVar[bool] = True

  @nn.compact
  def __call__(self, ids: jax.Array, train: bool) -> jax.Array:
    if not jnp.issubdtype(ids.dtype, jnp.integer) or ids.ndim != 2:
      raise ValueError(
        f"CharGPT takes integer character ids [windows, characters], got {ids.dtype} inputs "
        f"of shape {list(ids.shape)}."
      )
    embed = nn.Embed(
      self.vocab_size, self.width, embedding_init=nn.initializers.normal(0.02), name="embed"
    )
    position = self.param(
      "position", nn.initializers.normal(0.02), (1, ids.shape[1], self.width), jnp.float32
    )
    x = embed(ids.astype(jnp.int32)) + position
    x = nn.Dropout(self.dropout)(x, deterministic=not train)
    x = Encoder(
      num_layers=self.depth,
      num_heads=self.num_heads,
      hidden_features=self.hidden_features,
      activation=self.activation,
      dropout=self.dropout,
      dtype=self.dtype,
      causal=True,
      name="decoder",
    )(x.astype(self.dtype), deterministic=not train)
    return embed.attend(x.astype(jnp.float32))
