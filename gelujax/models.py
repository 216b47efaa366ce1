"""Flax Linen models of the GELU paper and of the transformer tasks, each taking its activation
as a callable.

Every model is ``__call__(x, train: bool)`` and has the fields ``activation`` (what
:class:`gelujax.linen.Activation` applies: a function of an array such as ``gelujax.gelu`` or
``jax.nn.relu``, or a Linen module class such as ``gelujax.LearnableGELU``;
:func:`gelujax.linen.make_activation` makes one from a spec such as ``"gelu_tanh"`` or
``"gaussian_gelu(sigma=0.5)"``, as ``TaskSpec.build_model`` does),
``dropout`` (the drop rate; 0 disables it) and ``dtype``, the type its layers and activations
compute in (``jnp.bfloat16`` for mixed precision; parameters and batch statistics stay float32,
as Flax's ``param_dtype`` default keeps them). Dropout draws from the ``'dropout'`` rng and is
active only when ``train=True``; batch-norm statistics live in the ``'batch_stats'`` collection.

``MODELS`` holds the paper's presets (``functools.partial`` of the general modules) and tiny
presets for tests:

- ``mlp_mnist``: 784 -> 8x128 -> 10 (MNIST, Fig. 2).
- ``mlp_mnist_gated``: ``mlp_mnist`` with gated hidden layers (``MLP(gated=True)``), 784 -> 8x80
  -> 10 with the same number of parameters (217,130 against 217,354; see :class:`MLP`).
- ``mlp_twitter_pos``: 150 -> 2x256 -> 25 (Twitter POS). The frozen lookup of the window's three
  50-d word embeddings is done once on the host by the task (``gelujax.tasks``, step
  ``embed_words``), as in the authors' code, so the model sees the 150-d vectors.
- ``embedding_mlp_twitter_pos``: the window's 3 word ids -> a trainable 50-d table -> the same
  150 -> 2x256 -> 25 MLP (Twitter POS with trainable embeddings); its ``vocab_size`` comes from
  the data (``gelujax.tasks.build``).
- ``spelling_mlp_twitter_pos``: ``embedding_mlp_twitter_pos`` that also reads each word's
  spelling: hashed character n-grams and shape flags (:mod:`gelujax.spelling`, the task's
  ``spell_words`` step), so that a word unseen in training is not one vector.
- ``mlp_timit``: 286 -> 5x2048 -> 39 (TIMIT frames; the paper's intended 39-way output).
- ``autoencoder_mnist``: 784 -> 1000 -> 500 -> 250 -> 30 -> 250 -> 500 -> 1000 -> 784 (Fig. 4).
- ``cifar_cnn``: the 9-conv CIFAR-10 network. ``wrn_40_4``: Wide ResNet 40-4 for CIFAR-100.
- ``vit_fashion_mnist``: a small Vision Transformer (:class:`ViT`: 16 patches of 7x7 pixels, 2
  pre-LN blocks of width 48, 4 heads, a feed-forward of 192) on 28x28 images;
  ``--activation=geglu`` gives its blocks gated feed-forwards at the same parameter count.
- ``vit_cifar10``: a ViT sized for an accelerator (:class:`ViT`: 64 patches of 4x4 pixels, 6
  pre-LN blocks of width 192, 3 heads, a feed-forward of 768: ViT-Tiny's width, depth halved)
  on 32x32 colour images;
- ``transformer_twitter_pos``: a tagger that reads the whole tweet (:class:`TransformerTagger`:
  each token's spelling-model vector of 50 features, projected to 64, a learned position, 2
  pre-LN blocks of 4 heads and a feed-forward of 256, 25 tags per token); its ``vocab_size``
  comes from the data.
- ``mlp_tiny``, ``mlp_tiny_gated``, ``vit_tiny``, ``embedding_mlp_tiny``, ``autoencoder_tiny``,
  ``cifar_cnn_tiny``, ``wrn_tiny``, ``transformer_tagger_tiny``: small versions, for tests.

Every convolution is :data:`gelujax.conv.Conv`: ``nn.Conv`` through a convolution whose kernel
gradient keeps a convolution net's training step inside the trainer's ``lax.scan`` fast on CPU.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from gelujax import spelling
from gelujax.activations import gated, gelu_tanh
from gelujax.conv import Conv
from gelujax.linen import Activation, Encoder
from gelujax.registry import Registry

MODELS: Registry = Registry("model")


def unit_norm_init(key: jax.Array, shape: Sequence[int], dtype=jnp.float32) -> jax.Array:
  """N(0, 1) weights with each output unit's incoming weights scaled to unit L2 norm.

  The paper's dense initialisation (``tf.nn.l2_normalize(tf.random_normal([in, out]), 0)``):
  for a Flax ``[in, out]`` kernel every column has norm 1.
  """
  w = jax.random.normal(key, shape, dtype)
  return w / jnp.linalg.norm(w, axis=0, keepdims=True)


# Lasagne's HeNormal(gain='relu') and HeNormal(): untruncated normals, std = gain/sqrt(fan_in).
_he_normal_relu = nn.initializers.variance_scaling(2.0, "fan_in", "normal")
_he_normal = nn.initializers.variance_scaling(1.0, "fan_in", "normal")


def _batch_norm(train: bool, dtype: Any) -> nn.BatchNorm:
  # Lasagne's defaults in the authors' CIFAR code: epsilon 1e-4, running averages updated with
  # alpha = 0.1, i.e. Flax momentum 0.9. Flax reduces in float32 whatever ``dtype`` is.
  return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-4, dtype=dtype)


def dense_parameter_count(widths: Sequence[int], gated: bool = False) -> int:
  """The weights and biases of dense layers through ``widths`` (input, hidden..., output); a
  gated hidden layer of width ``g`` has ``2 g`` outputs (value and gate) and passes on ``g``."""
  total = 0
  for i, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
    outputs = 2 * fan_out if gated and i < len(widths) - 2 else fan_out
    total += fan_in * outputs + outputs
  return total


@functools.cache
def gated_features(features: tuple[int, ...], num_inputs: int, num_outputs: int) -> tuple[int, ...]:
  """The hidden widths of a gated :class:`MLP` with the dense parameters of the ungated one.

  Every width is scaled by one factor, ``round(w * g / max(features))`` for the integer ``g``
  whose parameter count (:func:`dense_parameter_count`) is nearest the ungated one's (the
  smaller ``g`` on a tie): equal to within the rounding of the widest layer's width.
  Shazeer's rule, 2/3 of each width, is this rule for one feed-forward block between two layers
  of the same width ``d`` (``3 d d_gated = 2 d d_ff``; ``gated_features((2048,), 512, 512)`` is
  ``(1365,)``); in a stack it does not, as every gated layer reads the previous one's output
  and the first one the whole input (``mlp_mnist``'s 128 become 85: 236,650 parameters against
  217,354).
  """
  ungated = dense_parameter_count((num_inputs, *features, num_outputs))
  widest = max(features)

  def scaled(g: int) -> tuple[int, ...]:
    return tuple(max(1, round(w * g / widest)) for w in features)

  def mismatch(g: int) -> int:
    return abs(dense_parameter_count((num_inputs, *scaled(g), num_outputs), True) - ungated)

  return scaled(min(range(1, widest + 1), key=mismatch))


class MLP(nn.Module):
  """The paper's dense stack: ``features`` x [dense, activation, dropout] then a linear output.

  Inputs are flattened (``[B, ...] -> [B, D]``). Every dense layer, the output one included,
  uses :func:`unit_norm_init` and zero biases. Dropout follows every hidden activation; it is
  never applied to the inputs or the logits.

  *(choice)* With ``gated=True``, not in the paper, every hidden layer is a gated linear unit
  (Shazeer 2020, :func:`gelujax.gated`): a dense layer of ``2 g`` outputs, the first ``g`` the
  value and the last ``g`` the gate, which goes through the activation, and their product
  passed on (``activation="gelu"`` gives GEGLU layers, ``"silu"`` SwiGLU). The widths ``g``
  keep the ungated model's parameter count (:func:`gated_features`): Shazeer's 2/3 of each
  width keeps the count of one feed-forward block between two layers of one width, not of this
  stack, so every width is scaled by the one factor that keeps the dense layers' count to within
  the rounding of a width. ``mlp_mnist``'s 784 -> 8x128 -> 10 (217,354 parameters) becomes
  784 -> 8x80 -> 10 (217,130; 8x81 would have 220,978 and 2/3 of 128, 85, 236,650).

  Attributes:
    features: widths of the hidden layers (of the ungated model, when ``gated``).
    num_outputs: width of the linear output layer.
    activation: the activation (:class:`gelujax.linen.Activation`), applied after every hidden
      dense layer (to its gate, when ``gated``).
    dropout: drop rate after every hidden activation.
    dtype: the type the layers and activations compute in (parameters stay float32).
    gated: whether every hidden layer is a gated linear unit.
  """

  features: Sequence[int]
  num_outputs: int
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32
  gated: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    features = tuple(self.features)
    if self.gated:
      features = gated_features(features, x.shape[-1], self.num_outputs)
    for width in features:
      if self.gated:
        h = nn.Dense(2 * width, kernel_init=unit_norm_init, dtype=self.dtype)(x)
        act = Activation(self.activation)
        x = gated(h, functools.partial(act, deterministic=not train))
      else:
        x = nn.Dense(width, kernel_init=unit_norm_init, dtype=self.dtype)(x)
        x = Activation(self.activation)(x, deterministic=not train)
      x = nn.Dropout(self.dropout)(x, deterministic=not train)
    return nn.Dense(self.num_outputs, kernel_init=unit_norm_init, dtype=self.dtype)(x)


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


class Autoencoder(nn.Module):
  """A mirrored dense autoencoder with a linear output of the input's shape.

  ``encoder_features=(1000, 500, 250, 30)`` gives the paper's
  784 -> 1000 -> 500 -> 250 -> 30 -> 250 -> 500 -> 1000 -> 784. The activation follows every
  hidden layer, the code layer included; initialisation and dropout are the :class:`MLP`'s.

  Attributes:
    encoder_features: widths of the encoder's layers, the last one being the code.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate after every hidden activation (the paper uses none).
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  encoder_features: Sequence[int] = (1000, 500, 250, 30)
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    encoder = tuple(self.encoder_features)
    decoder = encoder[-2::-1]
    num_pixels = x[0].size
    mlp = MLP(encoder + decoder, num_pixels, self.activation, self.dropout, self.dtype)
    reconstruction = mlp(x, train)
    return reconstruction.reshape(x.shape)


class CifarCNN(nn.Module):
  """The paper's CIFAR-10 network: nine convolutions with batch norm, and BN on the logits.

  ``3x[conv3x3 w0, BN, act] -> maxpool2 -> dropout -> 3x[conv3x3 w1, BN, act] -> maxpool2 ->
  dropout -> conv3x3 w1 valid, BN, act -> 2x[conv1x1 w1, BN, act] -> global average pool ->
  dense -> BN``, with ``widths=(96, 192)`` in the paper. As Lasagne's ``batch_norm`` wrapper did
  in the authors' code, the layers followed by BN have no bias (BN's offset plays its part).
  Kernels are Glorot-uniform.

  Attributes:
    num_classes: number of logits.
    widths: channels of the first and of the second/third groups of convolutions.
    activation: the activation, after every batch norm but the last.
    dropout: drop rate after each max pool.
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  num_classes: int = 10
  widths: tuple[int, int] = (96, 192)
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.5
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    def conv_bn_act(x: jax.Array, features: int, kernel: int, padding) -> jax.Array:
      x = Conv(
        features,
        (kernel, kernel),
        padding=padding,
        use_bias=False,
        kernel_init=nn.initializers.glorot_uniform(),
        dtype=self.dtype,
      )(x)
      x = _batch_norm(train, self.dtype)(x)
      return Activation(self.activation)(x, deterministic=not train)

    for width in self.widths:
      for _ in range(3):
        x = conv_bn_act(x, width, 3, padding=1)
      x = nn.max_pool(x, (2, 2), strides=(2, 2))
      x = nn.Dropout(self.dropout)(x, deterministic=not train)
    x = conv_bn_act(x, self.widths[1], 3, padding="VALID")
    for _ in range(2):
      x = conv_bn_act(x, self.widths[1], 1, padding="VALID")
    x = jnp.mean(x, axis=(1, 2))
    x = nn.Dense(
      self.num_classes,
      use_bias=False,
      kernel_init=nn.initializers.glorot_uniform(),
      dtype=self.dtype,
    )(x)
    return _batch_norm(train, self.dtype)(x)


class WideResNetBlock(nn.Module):
  """The GELU paper's residual block (its authors' Lasagne code, not the usual pre-activation).

  ``conv3x3 (stride) -> act -> dropout -> conv3x3 -> act -> BN``, plus the shortcut: a bias-free
  1x1 projection conv (Glorot-uniform) when ``project``, else the identity. The 3x3 convs have
  biases and He-normal (ReLU gain) kernels; their padding is one pixel on every side, so a
  stride-2 block samples the same positions as its 1x1 projection.

  Attributes:
    features: output channels.
    strides: stride of the first conv and of the projection.
    project: whether the shortcut is a 1x1 projection.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate between the two convs.
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  features: int
  strides: int = 1
  project: bool = False
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    conv = functools.partial(
      Conv, self.features, (3, 3), padding=1, kernel_init=_he_normal_relu, dtype=self.dtype
    )
    y = conv(strides=self.strides)(x)
    y = Activation(self.activation)(y, deterministic=not train)
    y = nn.Dropout(self.dropout)(y, deterministic=not train)
    y = conv()(y)
    y = Activation(self.activation)(y, deterministic=not train)
    y = _batch_norm(train, self.dtype)(y)
    if self.project:
      x = Conv(
        self.features,
        (1, 1),
        strides=self.strides,
        use_bias=False,
        kernel_init=nn.initializers.glorot_uniform(),
        dtype=self.dtype,
      )(x)
    return x + y


class WideResNet(nn.Module):
  """Wide ResNet ``depth``-``width`` with the GELU paper's block (:class:`WideResNetBlock`).

  Stem ``conv3x3 16 (no bias) -> BN -> act -> BN`` (as in the authors' code), then three stages
  of ``(depth - 4) / 6`` blocks with ``16·width``, ``32·width``, ``64·width`` channels (the first
  block of each stage projects its shortcut; stages 2 and 3 start with stride 2), then
  ``BN -> act -> global average pool -> dense`` (He-normal, gain 1, with bias).

  Attributes:
    depth: total depth; ``depth - 4`` must be a positive multiple of 6 (40 in the paper).
    width: widening factor k (4 in the paper).
    num_classes: number of logits.
    activation: the activation (:class:`gelujax.linen.Activation`).
    dropout: drop rate inside every block (0.3 in the paper).
    dtype: the type the layers and activations compute in (parameters stay float32).
  """

  depth: int = 40
  width: int = 4
  num_classes: int = 100
  activation: Callable[..., Any] = gelu_tanh
  dropout: float = 0.3
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, train: bool) -> jax.Array:
    if self.depth < 10 or (self.depth - 4) % 6:
      raise ValueError(
        f"WideResNet depth={self.depth!r} is not valid: depth - 4 must be a positive multiple "
        "of 6 (e.g. 10, 16, 28, 40)."
      )
    blocks_per_stage = (self.depth - 4) // 6
    x = Conv(16, (3, 3), padding=1, use_bias=False, kernel_init=_he_normal_relu, dtype=self.dtype)(
      x
    )
    x = _batch_norm(train, self.dtype)(x)
    x = Activation(self.activation)(x, deterministic=not train)
    x = _batch_norm(train, self.dtype)(x)
    for stage, channels in enumerate((16, 32, 64)):
      for block in range(blocks_per_stage):
        x = WideResNetBlock(
          channels * self.width,
          strides=2 if stage > 0 and block == 0 else 1,
          project=block == 0,
          activation=self.activation,
          dropout=self.dropout,
          dtype=self.dtype,
        )(x, train)
    x = _batch_norm(train, self.dtype)(x)
    x = Activation(self.activation)(x, deterministic=not train)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes, kernel_init=_he_normal, dtype=self.dtype)(x)


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


MODELS.register("mlp_mnist", functools.partial(MLP, features=(128,) * 8, num_outputs=10))
MODELS.register(
  "mlp_mnist_gated", functools.partial(MLP, features=(128,) * 8, num_outputs=10, gated=True)
)
MODELS.register("mlp_twitter_pos", functools.partial(MLP, features=(256, 256), num_outputs=25))
MODELS.register(
  "embedding_mlp_twitter_pos",
  functools.partial(EmbeddingMLP, features=(256, 256), num_outputs=25, embed_dim=50),
)
MODELS.register(
  "spelling_mlp_twitter_pos",
  functools.partial(
    EmbeddingMLP, features=(256, 256), num_outputs=25, embed_dim=50, buckets=spelling.BUCKETS
  ),
)
MODELS.register("mlp_timit", functools.partial(MLP, features=(2048,) * 5, num_outputs=39))
MODELS.register("mlp_tiny", functools.partial(MLP, features=(16, 16), num_outputs=10))
MODELS.register(
  "mlp_tiny_gated", functools.partial(MLP, features=(16, 16), num_outputs=10, gated=True)
)
MODELS.register(
  "embedding_mlp_tiny",
  functools.partial(EmbeddingMLP, features=(16, 16), num_outputs=25, embed_dim=4),
)
MODELS.register("autoencoder_mnist", functools.partial(Autoencoder))
MODELS.register("autoencoder_tiny", functools.partial(Autoencoder, encoder_features=(16, 4)))
MODELS.register("cifar_cnn", functools.partial(CifarCNN, num_classes=10))
MODELS.register("cifar_cnn_tiny", functools.partial(CifarCNN, num_classes=10, widths=(4, 8)))
MODELS.register("wrn_40_4", functools.partial(WideResNet, depth=40, width=4, num_classes=100))
MODELS.register("wrn_tiny", functools.partial(WideResNet, depth=10, width=1, num_classes=10))
MODELS.register(
  "vit_fashion_mnist",
  functools.partial(ViT, num_classes=10, patch_size=7, width=48, depth=2, num_heads=4,
                    hidden_features=192),
)  # fmt: skip
MODELS.register(
  "vit_cifar10",
  functools.partial(ViT, num_classes=10, patch_size=4, width=192, depth=6, num_heads=3,
                    hidden_features=768),
)  # fmt: skip
MODELS.register(
  "transformer_twitter_pos",
  functools.partial(TransformerTagger, num_classes=25, width=64, depth=2, num_heads=4,
                    hidden_features=256, embed_dim=50, buckets=spelling.BUCKETS),
)  # fmt: skip
MODELS.register(
  "transformer_tagger_tiny",
  functools.partial(TransformerTagger, num_classes=25, width=16, depth=1, num_heads=2,
                    hidden_features=32, embed_dim=8, buckets=spelling.BUCKETS),
)  # fmt: skip
MODELS.register(
  "vit_tiny",
  functools.partial(ViT, num_classes=10, patch_size=7, width=16, depth=1, num_heads=2,
                    hidden_features=32),
)  # fmt: skip
# nanoGPT's shakespeare_char configurations: its CPU one (block 64 from the data) and its GPU
# one (block 256 from the data; its dropout 0.2 is the task's), and a tiny one for tests.
MODELS.register(
  "char_gpt_cpu",
  functools.partial(CharGPT, width=128, depth=4, num_heads=4, hidden_features=512),
)
MODELS.register(
  "char_gpt_gpu",
  functools.partial(CharGPT, width=384, depth=6, num_heads=6, hidden_features=1536),
)
MODELS.register(
  "char_gpt_tiny",
  functools.partial(CharGPT, width=16, depth=1, num_heads=2, hidden_features=64),
)
