"""How every study prints a number: one rule each for a value, a signed value, a percentage, a
count, a seed set, a learning rate and a size on disk.

Every printer says a value that is not a number (NaN, or None where there is none) as
:data:`DASH` ("–"), and an infinity as ``"inf"``/``"-inf"``; a printer that signs finite
values (:func:`signed`) signs infinities too (``"+inf"``). Finite values keep the caller's
precision, passed as an argument: significant digits (:func:`number`, :func:`signed`) or decimal
places (:func:`fixed`, :func:`percent`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

DASH = "–"  # U+2013: no number (NaN, or None)
ZERO = 1e-12  # a signed value this close to 0 (two opposite rates in floating point) is "+0"


def _not_finite(value: float | None, sign: bool = False) -> str | None:
  """The words of a value that is not finite, or None for a finite one."""
  if value is None or math.isnan(value):
    return DASH
  if math.isinf(value):
    return ("+inf" if sign else "inf") if value > 0 else "-inf"
  return None


def number(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
  """``value * scale`` to ``digits`` significant digits: ``"0.1235"``, ``"6.12"``, ``"inf"``."""
  return _not_finite(value) or f"{value * scale:.{digits}g}"


def fixed(value: float | None, scale: float = 1.0, places: int = 4) -> str:
  """``value * scale`` to ``places`` decimal places: ``"12.34"``, ``"0.3312"``."""
  return _not_finite(value) or f"{value * scale:.{places}f}"


def signed(value: float | None, *, scale: float = 1.0, digits: int = 3) -> str:
  """``value * scale`` signed, to ``digits`` significant digits: ``"+0.04"``, ``"-1.2e-05"``,
  ``"+inf"``; a value within :data:`ZERO` of 0 is ``"+0"``."""
  found = _not_finite(value, sign=True)
  if found:
    return found
  shown = value * scale
  return f"{0.0 if abs(shown) < ZERO else shown:+.{digits}g}"


def interval(
  centre: float | None,
  low: float | None,
  high: float | None,
  *,
  scale: float = 1.0,
  digits: int = 3,
  unit: str = "",
  sign: bool = True,
) -> str:
  """An estimate and its interval, the one way every study prints them: ``"+0.04 [-0.02,
  +0.11]"``, each :func:`signed` (or, without ``sign``, a :func:`number`) times ``scale`` to
  ``digits``; ``unit`` after the estimate (``"+12 tokens [+3, +20]"``)."""
  shown = [
    signed(v, scale=scale, digits=digits) if sign else number(v, scale, digits)
    for v in (centre, low, high)
  ]
  return f"{shown[0]}{' ' * bool(unit)}{unit} [{shown[1]}, {shown[2]}]"


def percent(count: float | None, total: float, places: int = 2) -> str:
  """``count`` as a percentage of ``total``, without the sign: ``"15.86"``."""
  return _not_finite(count) or f"{100.0 * count / total:.{places}f}"


def count(n: int | None) -> str:
  """A whole number, or :data:`DASH` where there is none."""
  return DASH if n is None else str(n)


def seeds(found: Iterable[int]) -> str:
  """A seed set: ``[0, 1, 2, 7]`` -> ``"0–2, 7"``: each run of 3 or more consecutive seeds as a
  range, the rest listed (``"3, 4"``)."""
  parts: list[list[int]] = []
  for seed in sorted(set(found)):
    if parts and seed == parts[-1][-1] + 1:
      parts[-1].append(seed)
    else:
      parts.append([seed])
  return ", ".join(f"{p[0]}–{p[-1]}" if len(p) > 2 else ", ".join(map(str, p)) for p in parts)


def lr(value: float) -> str:
  """A learning rate: ``"0.001"``, ``"3e-05"``."""
  return f"{value:g}"


def lrs(values: Iterable[float]) -> str:
  """Learning rates in the order given: ``"0.001, 0.0003"``."""
  return ", ".join(map(lr, values))


SIZE_UNITS = ("kB", "MB", "GB", "TB")  # Decimal: 1 kB = 1000 bytes.


def size(count: int) -> str:
  """A size on disk in bytes, in decimal units to 3 significant digits: ``"512 B"``,
  ``"5.31 MB"``, ``"1 GB"`` (999,999 bytes round to ``"1 MB"``, never ``"1e+03 kB"``)."""
  if count < 1000:
    return f"{count} B"
  value = float(count)
  for unit in SIZE_UNITS:
    value /= 1000
    shown = float(f"{value:.3g}")
    if shown < 1000 or unit == SIZE_UNITS[-1]:
      return f"{shown:g} {unit}"
  raise AssertionError("unreachable")
