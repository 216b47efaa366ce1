"""Model variables and training passes compiled as one program at XLA's optimization level 1.

Called eagerly, a Flax model's `init` (or a training pass with dropout) compiles the unrolled
threefry rounds of each initializer (or mask) as a program of its own at the default level, which
on a small CPU takes longer than the test. The engine compiles a run's `init` at level 1 on CPU
(`gelujax.engine.mesh.CPU_INIT_OPTIONS`), which draws the default level's bits (test_trainer
checks it): the tests compile so too.
"""

import functools

import jax

from gelujax.engine.mesh import CPU_INIT_OPTIONS

jit = functools.partial(jax.jit, compiler_options=CPU_INIT_OPTIONS)


def init(model, x, seed: int = 0):
  """``model.init(jax.random.key(seed), x, train=False)``, compiled as one program."""
  return jit(lambda x: model.init(jax.random.key(seed), x, train=False))(x)
