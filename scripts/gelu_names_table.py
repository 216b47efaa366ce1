"""Writes the table of every GELU name in docs/activations.md: formula, deviation, function.

Each row is a gelujax GELU-family name or an alias from gelujax.activations (another
framework's name, ``framework:name``). The deviation is computed from the gelujax function the
name resolves to, evaluated in float64, against x * Phi(x) from SciPy on a grid of step 1e-4
over -20 <= x <= 20; nothing in the table is typed by hand. tests/test_activations.py checks
that the page holds exactly what this script writes.

Run: python scripts/gelu_names_table.py           (rewrites the table in docs/activations.md)
     python scripts/gelu_names_table.py --check   (exit status 1 if the page is stale)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gelujax import specs
from gelujax.registry import parse_name

PAGE = Path(__file__).resolve().parents[1] / "docs" / "activations.md"
BEGIN = "<!-- gelu-names-table: begin (written by python scripts/gelu_names_table.py) -->"
END = "<!-- gelu-names-table: end -->"
X_MAX = 20
STEP = 1e-4
# Below this the float64 difference is rounding: the name computes x * Phi(x) itself.
EXACT = 1e-12
# gelujax's own GELU names, then every alias in registration order.
OWN_NAMES = ("gelu", "gelu_tanh", "gelu_fast", "gelu_sigmoid", "clipped_gelu")
# The formula each gelujax function computes, filled in with the spec's keyword arguments.
FORMULAS = {
  "gelu": "x·Φ(x) = ½x·(1 + erf(x/√2))",
  "gelu_tanh": "½x·(1 + tanh(√(2/π)·(x + 0.044715x³)))",
  "gelu_fast": "½x·(1 + tanh(0.7978845608·x·(1 + 0.044715x²)))",
  "gelu_sigmoid": "x·σ(1.702x)",
  "clipped_gelu": "min(max(x·Φ(x), {lower:g}), {upper:g})",
}
DEFAULTS = {"clipped_gelu": {"lower": -10.0, "upper": 10.0}}


def deviation_from_exact(spec: str) -> tuple[float, np.ndarray]:
  """Max |f(x) - x Phi(x)| over the grid and the x (one or two, mirrored) where it peaks."""
  x = np.linspace(-X_MAX, X_MAX, round(2 * X_MAX / STEP) + 1)
  with jax.enable_x64(True):
    y = np.asarray(specs.get_activation(spec)(jax.numpy.asarray(x)), np.float64)
  deviation = np.abs(y - x * special.ndtr(x))
  peak = deviation.max()
  return float(peak), x[deviation >= peak * (1 - 1e-9)]


def describe_peak(peak: float, where: np.ndarray) -> tuple[str, str]:
  """The table's deviation and 'at x' cells."""
  if peak < EXACT:
    return "0 (same formula)", "–"
  if np.isclose(where.min(), -where.max()) and len(where) > 1:
    at = f"±{where.max():.3f}"
  else:
    at = f"{where[0]:.3f}"
  if np.abs(where).max() >= X_MAX:
    at += " (end of range: grows with x)"
  return f"{peak:.2e}", at


def rows() -> list[tuple[str, str, str, str, str]]:
  """(name, formula, max deviation, at x, gelujax function) for every GELU name."""
  table = []
  for name, target in [*((n, n) for n in OWN_NAMES), *specs.activation_aliases().items()]:
    function, kwargs = parse_name(target)
    formula = FORMULAS[function].format(**{**DEFAULTS.get(function, {}), **kwargs})
    deviation, at = describe_peak(*deviation_from_exact(target))
    table.append((f"`{name}`", formula, deviation, at, f"`gelujax.{target}`"))
  return table


def render() -> str:
  """The Markdown table, between its markers."""
  lines = [
    BEGIN,
    "",
    f"| name | formula | max \\|f(x) − x·Φ(x)\\|, \\|x\\| ≤ {X_MAX} | at x | computed by |",
    "|---|---|---:|---|---|",
  ]
  lines += ["| " + " | ".join(row) + " |" for row in rows()]
  return "\n".join([*lines, "", END])


def page_table(text: str) -> str:
  """The table as it stands in the page's text, markers included."""
  begin, end = text.find(BEGIN), text.find(END)
  if begin < 0 or end < begin:
    raise ValueError(f"{PAGE} has no table between {BEGIN!r} and {END!r}.")
  return text[begin : end + len(END)]


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--check", action="store_true", help="only check that the page is current")
  args = parser.parse_args(argv)
  text = PAGE.read_text()
  current, table = page_table(text), render()
  if args.check:
    if current != table:
      print(f"{PAGE} is stale: run python scripts/gelu_names_table.py", file=sys.stderr)
      return 1
    return 0
  PAGE.write_text(text.replace(current, table))
  print(table)
  return 0


if __name__ == "__main__":
  sys.exit(main())
