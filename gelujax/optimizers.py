"""The paper's optimizers and learning-rate schedules, by name.

Each entry of ``OPTIMIZERS`` builds an ``optax.GradientTransformation`` from the peak learning
rate (a traced scalar under the engine's vmap over members), the run's ``epochs`` and the
optimizer steps per epoch (which a schedule defined over the run reads). A task names its
optimizer in ``TaskSpec.optimizer``; `build` builds it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from gelujax.registry import Registry

# (learning_rate, *, epochs, steps_per_epoch) -> optax.GradientTransformation.
OPTIMIZERS: Registry = Registry("optimizer")
# The optimizers whose every step is the same whatever the run's total epochs: a run of one of
# them may be trained further from its checkpoint. Any other (a schedule over the whole run,
# or an optimizer registered later and not listed here) makes a longer run a new run.
EXTENDABLE = frozenset({"adam"})


def extendable(name: str) -> bool:
  """Whether a run with the optimizer ``name`` may be trained for more epochs from its
  checkpoint: its steps so far do not depend on the total (`EXTENDABLE`)."""
  return name in EXTENDABLE


def build(
  name: str, learning_rate: float | jax.Array, *, epochs: int, steps_per_epoch: int
) -> optax.GradientTransformation:
  """The optimizer and schedule registered as ``name`` for a peak ``learning_rate``.

  Args:
    name: an ``OPTIMIZERS`` name.
    learning_rate: the peak learning rate; may be a traced scalar (one per vmapped member).
    epochs: the run's epochs, for schedules defined over the run.
    steps_per_epoch: optimizer steps per epoch, for schedules defined in epochs.
  """
  for field, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
      raise ValueError(f"{field}={value!r} is not valid: it must be an integer >= 1.")
  return OPTIMIZERS.lookup(name)(learning_rate, epochs=epochs, steps_per_epoch=steps_per_epoch)


@OPTIMIZERS.register("adam")
def _adam(learning_rate, *, epochs: int, steps_per_epoch: int) -> optax.GradientTransformation:
  """Adam (β1 0.9, β2 0.999, ε 1e-8 outside the root) at a constant rate: MNIST, AE, POS, TIMIT."""
  del epochs, steps_per_epoch
  return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)


@OPTIMIZERS.register("adam_anneal")
def _adam_anneal(
  learning_rate, *, epochs: int, steps_per_epoch: int
) -> optax.GradientTransformation:
  """The CIFAR-10 Adam: ε = 1e-8 inside the root; the second half of training annealed.

  At epoch ``e`` of ``E``: rate ``lr·min(2 − 2e/E, 1)`` (constant for the first half, then
  linear towards 0, piecewise constant per epoch as in the authors' code) and β1 = 0.9 before
  epoch E/2, 0.5 from it; bias correction uses the current β1, like the authors' Theano Adam.
  """
  half = epochs / 2

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
  learning_rate, *, epochs: int, steps_per_epoch: int
) -> optax.GradientTransformation:
  """The CIFAR-100 SGD: Nesterov momentum 0.9, rate ``lr·½(1 + cos(π·t/T))`` per step t.

  T = epochs · steps_per_epoch (one SGDR period over the whole run, ending at 0). *(choice)*
  optax's Nesterov keeps the momentum trace of raw gradients and scales by the current rate,
  where Lasagne's accumulated rate-scaled steps; the two agree while the rate is constant.
  """
  total = epochs * steps_per_epoch

  def rate(count: jax.Array) -> jax.Array:
    return learning_rate * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(count, total) / total))

  return optax.sgd(rate, momentum=0.9, nesterov=True)
