"""Tests for gelujax.optimizers: each of the paper's optimizers against NumPy in float64."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gelujax import optimizers, tasks


def get(name, **overrides):
  return tasks.get(name).replace(**overrides)


def test_optimizer_names():
  assert optimizers.OPTIMIZERS.names() == ["adam", "adam_anneal", "adamw_cosine", "nesterov_cosine"]


def set_counts(state, count):
  """The optimizer state with every step counter (``count`` field, at any depth) set."""
  if isinstance(state, tuple) and hasattr(state, "_fields"):
    return type(state)(
      **{
        field: jnp.asarray(count, jnp.int32) if field == "count" else set_counts(value, count)
        for field, value in zip(state._fields, state, strict=True)
      }
    )
  if isinstance(state, tuple | list):
    return type(state)(set_counts(value, count) for value in state)
  if isinstance(state, dict):
    return {key: set_counts(value, count) for key, value in state.items()}
  return state


def one_update(optimizer, grads, count=None):
  """The update from fresh moments, optionally with every step counter set to count."""
  params = jnp.zeros_like(grads)
  state = optimizer.init(params)
  if count is not None:
    state = set_counts(state, count)
  updates, _ = optimizer.update(grads, state, params)
  return np.asarray(updates, np.float64)


GRADS = np.array([0.5, -2.0, 1e-3, 3.0], np.float32)


def np_adam(grads_by_step, lrs, b1s, eps=0.0, eps_root=0.0, b2=0.999):
  m = v = 0.0
  updates = []
  for t, (g, lr, b1) in enumerate(zip(grads_by_step, lrs, b1s, strict=True), start=1):
    g = g.astype(np.float64)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    updates.append(-lr * m_hat / (np.sqrt(v_hat + eps_root) + eps))
  return updates


def run_updates(optimizer, grads_by_step):
  params = jnp.zeros_like(grads_by_step[0])
  state = optimizer.init(params)
  out = []
  for g in grads_by_step:
    updates, state = optimizer.update(jnp.asarray(g), state, params)
    out.append(np.asarray(updates, np.float64))
  return out


def test_adam_matches_numpy():
  grads = [GRADS, GRADS * -0.5 + 0.1]
  spec = tasks.get("mnist")
  got = run_updates(
    optimizers.build(spec.optimizer, 1e-3, epochs=spec.epochs, steps_per_epoch=10), grads
  )
  expected = np_adam(grads, [1e-3] * 2, [0.9] * 2, eps=1e-8)
  for g, e in zip(got, expected, strict=True):
    np.testing.assert_allclose(g, e, rtol=1e-4)


def test_adam_anneal_matches_numpy_through_the_switch():
  # 4 epochs of 2 steps: epochs 0, 1 at the full rate with b1 0.9; epoch 2 (= E/2) switches b1 to
  # 0.5 at rate factor min(2 - 2*2/4, 1) = 1; epoch 3 runs at factor 2 - 2*3/4 = 0.5.
  spec = get("cifar10", epochs=4)
  rng = np.random.default_rng(2)
  grads = [rng.normal(size=4).astype(np.float32) for _ in range(8)]
  factors = [1, 1, 1, 1, 1, 1, 0.5, 0.5]
  b1s = [0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5]
  got = run_updates(
    optimizers.build(spec.optimizer, 2e-3, epochs=spec.epochs, steps_per_epoch=2), grads
  )
  expected = np_adam(grads, [2e-3 * f for f in factors], b1s, eps_root=1e-8)
  for g, e in zip(got, expected, strict=True):
    np.testing.assert_allclose(g, e, rtol=1e-5)


@pytest.mark.parametrize(
  ("epoch", "factor", "b1"),
  [(0, 1.0, 0.9), (99, 1.0, 0.9), (100, 1.0, 0.5), (150, 0.5, 0.5), (199, 0.01, 0.5)],
)
def test_cifar10_schedule_at_epochs(epoch, factor, b1):
  # 500 steps per epoch (50k / 100); the state's counters say `epoch` epochs have passed, plus
  # 7 steps. With zero moments the update is -lr·(1-b1)g/(1-b1^t) / sqrt((1-b2)g²/(1-b2^t) + 1e-8).
  spec = tasks.get("cifar10")
  count = epoch * 500 + 7
  got = one_update(
    optimizers.build(spec.optimizer, 1e-3, epochs=spec.epochs, steps_per_epoch=500),
    jnp.asarray(GRADS),
    count,
  )
  t, g = count + 1, GRADS.astype(np.float64)
  m_hat = (1 - b1) * g / (1 - b1**t)
  v_hat = (1 - 0.999) * g**2 / (1 - 0.999**t)
  np.testing.assert_allclose(got, -1e-3 * factor * m_hat / np.sqrt(v_hat + 1e-8), rtol=1e-4)


@pytest.mark.parametrize(("fraction", "factor"), [(0, 1.0), (0.5, 0.5), (1, 0.0), (0.25, None)])
def test_cifar100_cosine_schedule(fraction, factor):
  spec = tasks.get("cifar100")
  steps_per_epoch = 781  # 100k flip-doubled images / 128
  total = 50 * steps_per_epoch
  count = int(fraction * total)
  if factor is None:  # a point off the easy values: 0.5·(1 + cos(π/4))
    factor = 0.5 * (1 + math.cos(math.pi * count / total))
  got = one_update(
    optimizers.build(spec.optimizer, 0.1, epochs=spec.epochs, steps_per_epoch=steps_per_epoch),
    jnp.asarray(GRADS),
    count,
  )
  # Nesterov from a zero trace: update = -lr·(g + 0.9·g).
  np.testing.assert_allclose(got, -0.1 * factor * 1.9 * GRADS, rtol=1e-5, atol=1e-9)


def test_nesterov_matches_numpy_over_steps():
  spec = get("cifar100", epochs=1)
  g1, g2 = GRADS, GRADS[::-1].copy()
  got = run_updates(
    optimizers.build(spec.optimizer, 0.1, epochs=spec.epochs, steps_per_epoch=4), [g1, g2]
  )
  rate = [0.1 * 0.5 * (1 + math.cos(math.pi * t / 4)) for t in range(2)]
  trace1 = g1
  trace2 = g2 + 0.9 * trace1
  np.testing.assert_allclose(got[0], -rate[0] * (g1 + 0.9 * trace1), rtol=1e-5)
  np.testing.assert_allclose(got[1], -rate[1] * (g2 + 0.9 * trace2), rtol=1e-5)


@pytest.mark.parametrize("name", ["mnist", "cifar10", "cifar100"])
def test_learning_rate_may_be_traced_per_member(name):
  spec = tasks.get(name)

  def member_update(lr):
    return jnp.asarray(
      one_update_traced(optimizers.build(spec.optimizer, lr, epochs=spec.epochs, steps_per_epoch=3))
    )

  lrs = jnp.array([1e-2, 1e-3], jnp.float32)
  updates = jax.jit(jax.vmap(member_update))(lrs)
  np.testing.assert_allclose(updates[0], 10 * updates[1], rtol=1e-5)


def one_update_traced(optimizer):
  params = jnp.zeros(4)
  updates, _ = optimizer.update(jnp.asarray(GRADS), optimizer.init(params), params)
  return updates


def test_build_rejects_bad_epochs_and_steps_per_epoch():
  with pytest.raises(ValueError, match=r"steps_per_epoch=0 .* integer >= 1"):
    optimizers.build("adam_anneal", 1e-3, epochs=200, steps_per_epoch=0)
  with pytest.raises(ValueError, match=r"epochs=2.5 .* integer >= 1"):
    optimizers.build("adam_anneal", 1e-3, epochs=2.5, steps_per_epoch=10)
