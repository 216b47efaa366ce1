"""Refits the polynomial coefficients of the exact GELU in gelujax/_gelu_numerics.py (prints them).

With a = |x| and t = 3 / (3 + a) in (0, 1]:
  M(t) = m(a) / t,          m(a) = Phi(-a) exp(a^2 / 2) = erfcx(a / sqrt(2)) / 2,
  S(t) = (m(a) - a phi(0)) / (r - a),  r = the root of GELU'(-a) (x = -0.7518...),
are fitted as degree-12 polynomials in t by relative-weighted Chebyshev least squares on
Chebyshev nodes, with mpmath (40 digits) as the reference.

Run: python scripts/fit_gelu_polynomials.py
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 40
T_SCALE = 3.0
DEGREE = 12
NODES = 700


def mills(a: float) -> mp.mpf:
  a = mp.mpf(a)
  return mp.erfc(a / mp.sqrt(2)) * mp.exp(a * a / 2) / 2


def fit(values: np.ndarray, t: np.ndarray) -> np.ndarray:
  """Power-basis coefficients in t (lowest first) of the weighted Chebyshev fit."""
  cheb = np.polynomial.chebyshev.chebfit(2 * t - 1, values, DEGREE, w=1 / np.abs(values))
  in_s = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(cheb))
  return in_s(np.polynomial.Polynomial([-1.0, 2.0])).coef


def main() -> None:
  root = mp.findroot(lambda a: mills(a) - a / mp.sqrt(2 * mp.pi), 0.75)
  k = np.arange(NODES)
  t = 0.5 * (1 - np.cos(np.pi * (k + 0.5) / NODES))
  a = T_SCALE * (1 - t) / t
  m = np.array([float(mills(v)) for v in a])
  s = np.array([float((mills(v) - mp.mpf(v) / mp.sqrt(2 * mp.pi)) / (root - v)) for v in a])
  root_hi = np.float32(float(root))
  print(f"_ROOT_HI = {float(root_hi)!r}\n_ROOT_LO = {float(root - mp.mpf(float(root_hi)))!r}")
  for name, values in [("_MILLS_COEFFS", m / t), ("_ROOT_COEFFS", s)]:
    coeffs = ", ".join(repr(float(np.float32(c))) for c in fit(values, t))
    print(f"{name} = ({coeffs})")


if __name__ == "__main__":
  main()
