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


# nanoGPT's schedule: linear warmup over these steps, then a cosine to a tenth of the peak rate.
WARMUP_STEPS = 100
FINAL_RATE_FRACTION = 0.1


@OPTIMIZERS.register("adamw_cosine")
def _adamw_cosine(
  learning_rate, *, epochs: int, steps_per_epoch: int
) -> optax.GradientTransformation:
  """nanoGPT's AdamW (``shakespeare_char``): β1 0.9, β2 0.99, ε 1e-8, weight decay 0.1 on the
  matrices and embeddings (parameters of two or more axes; not on biases and norms), the global
  gradient norm clipped to 1, and a rate warmed up linearly over `WARMUP_STEPS` steps from 0,
  then decayed by a cosine over the rest of the run (T = epochs · steps_per_epoch) to
  `FINAL_RATE_FRACTION` of the peak.
  """
  total = epochs * steps_per_epoch
  warmup = min(WARMUP_STEPS, max(total - 1, 1))

  def rate(count: jax.Array) -> jax.Array:
    step = count.astype(jnp.float32)
    warm = (step + 1) / warmup
    progress = jnp.clip((step - warmup) / max(total - warmup, 1), 0.0, 1.0)
    cosine = 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
    decayed = FINAL_RATE_FRACTION + (1 - FINAL_RATE_FRACTION) * cosine
    return learning_rate * jnp.where(step < warmup, warm, decayed)

  def matrices(params):
    return jax.tree.map(lambda p: p.ndim >= 2, params)

  return optax.chain(
    optax.clip_by_global_norm(1.0),
    optax.adamw(rate, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.1, mask=matrices),
  )
