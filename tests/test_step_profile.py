"""`benchmarks/step_profile.py` reads this jaxlib's optimized HLO and profiler traces as they are:
every thunk a real trace records is an instruction of the real module, each is placed by what it
computes and by the Python line that made it, and no time is counted twice."""

import collections
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gelujax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import step_profile


def test_a_traced_loop_is_placed_by_its_thunks_and_lines_and_counted_once(tmp_path):
  def layers(x, w):  # A loop (a while thunk enclosing its body's thunks) of products and GELUs.
    return jax.lax.fori_loop(0, 20, lambda _, h: gelujax.gelu(h @ w) * 0.5, x)

  f = jax.jit(layers)
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(64, 256)), jnp.float32)
  w = jnp.asarray(rng.normal(size=(256, 256)) / 16.0, jnp.float32)
  module = step_profile.parse_hlo(f.lower(x, w).compile().as_text())
  f(x, w).block_until_ready()
  with jax.profiler.trace(str(tmp_path)):
    for _ in range(3):
      f(x, w).block_until_ready()
  (xplane,) = tmp_path.rglob("*.xplane.pb")
  times, span = step_profile.thunk_self_times(xplane, set(module["instructions"]))
  opcodes = {module["instructions"][name]["opcode"] for name in times}
  assert {"dot", "while"} <= opcodes, opcodes
  # Self times: the while's time less its body's, so that all of them fit in the traced span
  # (counting the loop's whole time besides its body's would nearly double the sum).
  assert 0 < sum(times.values()) <= span
  loop = sum(t for name, t in times.items() if module["instructions"][name]["opcode"] == "while")
  assert loop < 0.5 * sum(times.values())

  categories, lines = collections.Counter(), collections.Counter()
  for thunk, seconds in times.items():
    for (category, line), share in step_profile.attribute(
      module, thunk, step_profile._dropout_off_lines()
    ).items():
      categories[category] += seconds * share
      lines[line] += seconds * share
  assert categories[step_profile.PRODUCTS] > 0
  assert categories[step_profile.ACTIVATION] > 0
  assert set(categories) <= {*step_profile.CATEGORIES, "loop control"}, categories
  activation_lines = [line for line in lines if line.startswith(("activations/", "_gelu_"))]
  assert activation_lines, lines
  assert np.isclose(sum(categories.values()), sum(times.values()))
