"""Tests for gelujax.cli (the list flags shared by experiments/train.py and reproduce.py)."""

import pytest

from gelujax import cli


@pytest.mark.parametrize(
  ("values", "expected"),
  [(None, [0, 1, 2]), ([], [0, 1, 2]), (["2"], [0, 1]), (["4", "7"], [4, 7]), (["7", ""], [7])],
)
def test_parse_seeds(values, expected):
  assert cli.parse_seeds(values, 3) == expected


@pytest.mark.parametrize("values", [["x"], ["0"], ["1.5", "2"], [""]])
def test_parse_seeds_rejects(values):
  with pytest.raises(ValueError, match="--seeds"):
    cli.parse_seeds(values, 3)


def test_parse_floats():
  assert cli.parse_floats("learning_rates", ["1e-3", "0.5"], (9.0,)) == [1e-3, 0.5]
  assert cli.parse_floats("learning_rates", None, (9.0,)) == [9.0]


def test_parse_floats_names_the_flag():
  with pytest.raises(ValueError, match=r"--dropout_rates '0.5,x' is not a list of numbers"):
    cli.parse_floats("dropout_rates", ["0.5", "x"], ())
