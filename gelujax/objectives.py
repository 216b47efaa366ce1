"""What a task trains for: its batch preparation (scaling, augmentation), loss, metrics and
regularizer, by name.

An objective is a frozen dataclass of the few values it needs (``weight_decay``,
``input_noise``, ``crop_padding``) whose methods are pure and jittable; the training step
receives one explicitly (`gelujax.engine.step`). ``OBJECTIVES`` holds the paper's two,
``classification`` and ``reconstruction``, and ``token_classification`` (a tag per token of
each example, for a tagger that reads whole tweets); a task names its own in
``TaskSpec.objective`` and `make` builds it from the task's values.

The metrics are sums; the engine divides a split's by what the objective counts in it
(`Objective.count`: its examples, or its tokens).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gelujax.registry import Registry

# name -> a subclass of `Objective`.
OBJECTIVES: Registry = Registry("objective")


@dataclasses.dataclass(frozen=True)
class Objective:
  """A task's batch preparation, loss, metrics and regularizer (a subclass says which loss).

  Attributes:
    weight_decay: coefficient of the L2 penalty ``weight_decay * Σθ²`` over the conv/dense
      kernels and batch-norm scales, added to the training loss.
    input_noise: standard deviation of the Gaussian noise added to training inputs.
    crop_padding: training inputs are random crops of the image zero-padded by this many pixels
      (0 disables cropping).
  """

  weight_decay: float = 0.0
  input_noise: float = 0.0
  crop_padding: int = 0

  # The keys of `metrics`.
  metric_names: ClassVar[tuple[str, ...]] = ("loss",)
  # Whether the targets are a tag per token of each example, [examples, tokens] with -1 at
  # padding, rather than one an example (`gelujax.tasks.build` checks the data).
  per_token: ClassVar[bool] = False

  def targets(self, batch: Mapping[str, jax.Array], inputs: jax.Array) -> jax.Array:
    """What the outputs are compared with: the batch's targets (``inputs``: the clean inputs)."""
    del inputs
    return batch["targets"]

  def prepare_batch(
    self, batch: Mapping[str, jax.Array], train: bool, key: jax.Array | None
  ) -> tuple[jax.Array, jax.Array]:
    """Device-side, jittable batch preparation: ``(inputs, targets)`` for the model and loss.

    uint8 inputs are scaled to [0, 1]; floating inputs are taken as already scaled. In training,
    inputs are randomly cropped (``crop_padding``) and get Gaussian noise (``input_noise``), each
    example with its own draw from ``key``.

    Args:
      batch: at least ``"inputs"`` and, for classification, ``"targets"``.
      train: whether to apply the training-time augmentation (a Python bool).
      key: PRNG key of this batch; unused when ``train`` is False.
    """
    inputs = batch["inputs"]
    if inputs.dtype == jnp.uint8:
      inputs = inputs.astype(jnp.float32) / 255.0
    targets = self.targets(batch, inputs)
    if train and (self.crop_padding or self.input_noise):
      crop_key, noise_key = jax.random.split(key)
      if self.crop_padding:
        inputs = random_crop(inputs, self.crop_padding, crop_key)
      if self.input_noise:
        inputs = inputs + self.input_noise * jax.random.normal(
          noise_key, inputs.shape, inputs.dtype
        )
    return inputs, targets

  def per_example_loss(self, outputs: jax.Array, targets: jax.Array) -> jax.Array:
    """Each example's loss, [B]."""
    raise NotImplementedError

  def loss(self, outputs: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array:
    """The mean per-example loss over the examples with ``mask == 1`` (0 if there are none)."""
    mask = mask.astype(jnp.float32)
    total = jnp.sum(self.per_example_loss(outputs, targets) * mask)
    return total / jnp.maximum(jnp.sum(mask), 1.0)

  def metrics(
    self, outputs: jax.Array, targets: jax.Array, mask: jax.Array
  ) -> dict[str, jax.Array]:
    """Sums over the examples with ``mask == 1`` of each of `metric_names`; the engine divides
    them by `count` of the split."""
    mask = mask.astype(jnp.float32)
    return {"loss": jnp.sum(self.per_example_loss(outputs, targets) * mask)}

  def count(self, split: Mapping[str, np.ndarray]) -> int:
    """What `metrics` sums over in a whole ``split`` (host arrays), by which the engine divides
    the sums into means (`gelujax.engine.fit`): its examples."""
    return len(split["targets"])

  def regularizer(self, params: Any) -> jax.Array:
    """``weight_decay * Σθ²`` over every ``kernel`` (conv, dense) and ``scale`` (batch norm)."""
    if not self.weight_decay:
      return jnp.zeros((), jnp.float32)
    decayed = [
      leaf
      for path, leaf in jax.tree_util.tree_leaves_with_path(params)
      if getattr(path[-1], "key", None) in ("kernel", "scale")
    ]
    return self.weight_decay * sum(jnp.sum(jnp.square(leaf)) for leaf in decayed)


@OBJECTIVES.register("classification")
@dataclasses.dataclass(frozen=True)
class Classification(Objective):
  """Softmax cross-entropy with integer targets; metrics ``loss`` and ``error``."""

  metric_names: ClassVar[tuple[str, ...]] = ("loss", "error")

  def per_example_loss(self, outputs: jax.Array, targets: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(outputs, targets)

  def metrics(
    self, outputs: jax.Array, targets: jax.Array, mask: jax.Array
  ) -> dict[str, jax.Array]:
    sums = super().metrics(outputs, targets, mask)
    wrong = jnp.argmax(outputs, axis=-1) != targets
    sums["error"] = jnp.sum(wrong * mask.astype(jnp.float32))
    return sums


@OBJECTIVES.register("token_classification")
@dataclasses.dataclass(frozen=True)
class TokenClassification(Objective):
  """Softmax cross-entropy of a tag per token: each example a sequence, its outputs
  ``[B, L, classes]``, its targets ``[B, L]`` integer tags, -1 beyond its end (padding, no tag).

  A token counts (it is *valid*) where its target is >= 0 and its example's ``mask`` is 1. The
  loss is the mean cross-entropy over the batch's valid tokens (0 where there are none), so a
  long tweet weighs as many tokens as it has; the metrics ``loss`` and ``error`` are sums over
  the valid tokens, and `count` is a split's tokens with a tag: the engine reports means per
  token, as the window model's, whose examples are tokens.
  """

  metric_names: ClassVar[tuple[str, ...]] = ("loss", "error")
  per_token: ClassVar[bool] = True

  def per_token_loss(self, outputs: jax.Array, targets: jax.Array) -> jax.Array:
    """Each token's cross-entropy, ``[B, L]`` (that of tag 0 at padding: `valid` masks it)."""
    return optax.softmax_cross_entropy_with_integer_labels(outputs, jnp.maximum(targets, 0))

  @staticmethod
  def valid(targets: jax.Array, mask: jax.Array) -> jax.Array:
    """1.0 for the tokens that count, ``[B, L]``: a tag (target >= 0) in an example of mask 1."""
    return ((targets >= 0) & (mask[:, None] > 0)).astype(jnp.float32)

  def loss(self, outputs: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array:
    valid = self.valid(targets, mask)
    total = jnp.sum(self.per_token_loss(outputs, targets) * valid)
    return total / jnp.maximum(jnp.sum(valid), 1.0)

  def metrics(
    self, outputs: jax.Array, targets: jax.Array, mask: jax.Array
  ) -> dict[str, jax.Array]:
    valid = self.valid(targets, mask)
    wrong = jnp.argmax(outputs, axis=-1) != targets
    return {
      "loss": jnp.sum(self.per_token_loss(outputs, targets) * valid),
      "error": jnp.sum(wrong * valid),
    }

  def count(self, split: Mapping[str, np.ndarray]) -> int:
    """The split's tokens with a tag (target >= 0)."""
    return int(np.count_nonzero(np.asarray(split["targets"]) >= 0))


@OBJECTIVES.register("reconstruction")
@dataclasses.dataclass(frozen=True)
class Reconstruction(Objective):
  """The per-example mean squared error against the clean inputs (the autoencoder)."""

  def targets(self, batch: Mapping[str, jax.Array], inputs: jax.Array) -> jax.Array:
    del batch
    return inputs

  def per_example_loss(self, outputs: jax.Array, targets: jax.Array) -> jax.Array:
    squared = jnp.square(outputs - targets)
    return jnp.mean(squared.reshape(squared.shape[0], -1), axis=1)


def make(
  name: str, *, weight_decay: float = 0.0, input_noise: float = 0.0, crop_padding: int = 0
) -> Objective:
  """The objective registered as ``name`` with these values."""
  return OBJECTIVES.lookup(name)(
    weight_decay=weight_decay, input_noise=input_noise, crop_padding=crop_padding
  )


def random_crop(images_BxHxWxC: jax.Array, padding: int, key: jax.Array) -> jax.Array:
  """Per-example random ``H x W`` crops of the images zero-padded by ``padding`` pixels.

  Offsets are uniform over the ``(2·padding + 1)²`` positions, as in the authors' WRN code.
  """
  _, height, width, channels = images_BxHxWxC.shape
  pad = ((0, 0), (padding, padding), (padding, padding), (0, 0))
  padded = jnp.pad(images_BxHxWxC, pad)
  offsets = jax.random.randint(key, (images_BxHxWxC.shape[0], 2), 0, 2 * padding + 1)

  def crop(image: jax.Array, offset: jax.Array) -> jax.Array:
    start = (offset[0], offset[1], 0)
    return jax.lax.dynamic_slice(image, start, (height, width, channels))

  return jax.vmap(crop)(padded, offsets)
