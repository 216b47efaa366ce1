"""Tests for gelujax.study.numbers, the one printer of every study's numbers: each rule against
strings written out by hand (the committed results' own lines are re-derived in
tests/test_results.py, independently of this module)."""

import math
from pathlib import Path

from gelujax.study import numbers, pilot

NAN, INF = math.nan, math.inf


def test_a_number_to_significant_digits():
  assert numbers.number(0.123456) == "0.1235"
  assert numbers.number(0.0612, 100) == "6.12"
  assert numbers.number(-0.0018712, 1.0, 3) == "-0.00187"
  assert numbers.number(6.71e-06, 1.0, 3) == "6.71e-06"
  assert numbers.number(1e-05) == "1e-05"


def test_a_value_that_is_not_a_number_is_a_dash_and_an_infinity_inf():
  assert numbers.number(None) == numbers.number(NAN) == numbers.number(NAN, 100) == "–"
  assert numbers.number(-INF) == "-inf" and numbers.number(INF, 100, 3) == "inf"
  # mnist_ae's README: a 3-pair paired interval is unbounded, unsigned as every shift there.
  assert f"[{numbers.number(-INF, 1.0, 3)}, {numbers.number(INF, 1.0, 3)}]" == "[-inf, inf]"
  for printer in (numbers.fixed, numbers.signed):
    assert printer(None) == printer(NAN) == "–"
  assert numbers.percent(NAN, 7152) == numbers.count(None) == "–"


def test_a_number_to_decimal_places():
  assert numbers.fixed(0.5, 100, 2) == "50.00"
  assert numbers.fixed(0.37634) == "0.3763"
  assert numbers.fixed(3.0, places=1) == "3.0"
  assert numbers.fixed(INF) == "inf" and numbers.fixed(-INF, 100, 2) == "-inf"


def test_a_signed_number():
  assert numbers.signed(0.04) == "+0.04"
  assert numbers.signed(-1.2e-05) == "-1.2e-05"
  assert numbers.signed(0.00468, scale=100) == "+0.468"
  assert numbers.signed(33.5, digits=5) == "+33.5"
  assert numbers.signed(-1134.0, digits=5) == "-1134"
  # Within 1e-12 of zero (two opposite rates in floating point): +0, either side.
  assert numbers.signed(1e-13) == numbers.signed(-1e-13) == numbers.signed(0.0) == "+0"
  assert numbers.signed(2e-15, scale=100) == "+0"
  # A signed printer signs an infinity as it signs a finite value.
  assert numbers.signed(INF) == "+inf" and numbers.signed(-INF, scale=100) == "-inf"


def test_a_count_as_a_percentage_of_its_split():
  # 1134 and 1107 of 7152 tokens: 15.8557...% and 15.4781...%.
  assert numbers.percent(1134, 7152) == "15.86"
  assert numbers.percent(1107.0, 7152) == "15.48"
  assert numbers.percent(1134, 7152, places=1) == "15.9"
  assert numbers.percent(INF, 7152) == "inf"


def test_a_count():
  assert numbers.count(139) == "139" and numbers.count(0) == "0"


def test_a_seed_set():
  assert numbers.seeds([0, 1, 2, 7]) == "0–2, 7"
  assert numbers.seeds(range(100, 110)) == "100–109"
  assert numbers.seeds([3, 4]) == "3, 4"
  assert numbers.seeds([]) == ""
  assert numbers.seeds([2, 0, 1, 1]) == "0–2"  # sorted, each seed once
  # vit_fashion_mnist_study's members at their last epoch.
  assert numbers.seeds([303, 304, 305, 307, 308, 310]) == "303–305, 307, 308, 310"
  assert numbers.seeds([305, 300, 304, 303]) == "300, 303–305"


def test_a_learning_rate():
  assert numbers.lr(1e-3) == "0.001" and numbers.lr(3e-4) == "0.0003"
  assert numbers.lr(1e-05) == "1e-05" and numbers.lr(2e-3) == "0.002"
  assert numbers.lrs((1e-3, 1e-4, 1e-5)) == "0.001, 0.0001, 1e-05"
  assert numbers.lrs(x for x in (3e-4,)) == "0.0003" and numbers.lrs([]) == ""


def test_a_pilot_metric_shows_percent_to_2_decimals_and_nats_to_4():
  assert pilot.ERROR.words(0.1376) == "13.76"
  assert pilot.LOSS.words(0.37634) == "0.3763"
  assert pilot.ERROR.words(NAN) == pilot.LOSS.words(NAN) == "–"


def test_no_study_module_prints_a_missing_value_its_own_way():
  """Every non-finite value goes through this module: no study module writes "n/a", nor "—"
  (U+2014) for a missing number."""
  study = Path(numbers.__file__).parent
  found = [p.name for p in study.glob("*.py") if '"n/a"' in p.read_text() or '"—"' in p.read_text()]
  assert found == []
