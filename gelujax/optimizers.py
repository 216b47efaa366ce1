"""The paper's optimizers and learning-rate schedules, by name.

Each entry of ``OPTIMIZERS`` builds an ``optax.GradientTransformation`` from a task (it reads
``epochs`` where a schedule is defined over the run), the peak learning rate (a traced scalar
under the trainer's vmap over members) and the optimizer steps per epoch. A task names its
optimizer in ``TaskSpec.optimizer``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from gelujax.registry import Registry

# (task, learning_rate, steps_per_epoch) -> optax.GradientTransformation.
OPTIMIZERS: Registry = Registry("optimizer")


@OPTIMIZERS.register("adam")
def _adam(spec: Any, learning_rate, steps_per_epoch: int) -> optax.GradientTransformation:
  """Adam (β1 0.9, β2 0.999, ε 1e-8 outside the root) at a constant rate: MNIST, AE, POS, TIMIT."""
  del spec, steps_per_epoch
  return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)


@OPTIMIZERS.register("adam_anneal")
def _adam_anneal(spec: Any, learning_rate, steps_per_epoch: int) -> optax.GradientTransformation:
  """The CIFAR-10 Adam: ε = 1e-8 inside the root; the second half of training annealed.

  At epoch ``e`` of ``E``: rate ``lr·min(2 − 2e/E, 1)`` (constant for the first half, then
  linear towards 0, piecewise constant per epoch as in the authors' code) and β1 = 0.9 before
  epoch E/2, 0.5 from it; bias correction uses the current β1, like the authors' Theano Adam.
  """
  half = spec.epochs / 2

  def epoch(count: jax.Array) -> jax.Array:
    return count // steps_per_epoch

  def b1(count: jax.Array) -> jax.Array:
    return jnp.where(epoch(count) < half, 0.9, 0.5)

  def rate(count: jax.Array) -> jax.Array:
    return learning_rate * jnp.minimum(2.0 - epoch(count) / half, 1.0)

  adam = optax.inject_hyperparams(optax.scale_by_adam)(b1=b1, b2=0.999, eps=0.0, eps_root=1e-8)
  return optax.chain(adam, optax.scale_by_learning_rate(rate))


@OPTIMIZERS.register("nesterov_cosine")
def _nesterov_cosine(
  spec: Any, learning_rate, steps_per_epoch: int
) -> optax.GradientTransformation:
  """The CIFAR-100 SGD: Nesterov momentum 0.9, rate ``lr·½(1 + cos(π·t/T))`` per step t.

  T = epochs · steps_per_epoch (one SGDR period over the whole run, ending at 0). *(choice)*
  optax's Nesterov keeps the momentum trace of raw gradients and scales by the current rate,
  where Lasagne's accumulated rate-scaled steps; the two agree while the rate is constant.
  """
  total = spec.epochs * steps_per_epoch

  def rate(count: jax.Array) -> jax.Array:
    return learning_rate * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(count, total) / total))

  return optax.sgd(rate, momentum=0.9, nesterov=True)
