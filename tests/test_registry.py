"""Tests for gelujax.registry."""

import functools

import pytest

from gelujax.registry import Registry, parse_name


def scale(x, factor=1.0, offset=0.0):
  return x * factor + offset


@pytest.fixture
def registry():
  r = Registry("widget")
  r.register("scale", scale)

  @r.register("double")
  def double(x):
    return 2 * x

  return r


@pytest.mark.parametrize(
  ("spec", "expected"),
  [
    ("gelu", ("gelu", {})),
    (" gelu ", ("gelu", {})),
    ("gaussian_gelu(mu=0.5, sigma=2.0)", ("gaussian_gelu", {"mu": 0.5, "sigma": 2.0})),
    ("f(a=-1, b='s', c=(1, 2), d=None)", ("f", {"a": -1, "b": "s", "c": (1, 2), "d": None})),
    ("f()", ("f", {})),
  ],
)
def test_parse_name(spec, expected):
  assert parse_name(spec) == expected


@pytest.mark.parametrize(
  "spec", ["", "1+2", "f(1)", "f(x=y)", "f(**k)", "a.b", "f(x=__import__('os'))", "f(x="]
)
def test_parse_name_rejects(spec):
  with pytest.raises(ValueError, match="Cannot parse"):
    parse_name(spec)


def test_get_bare_name_returns_entry(registry):
  assert registry.get("scale") is scale
  assert registry.get("double")(3) == 6


def test_get_with_arguments_binds_them(registry):
  fn = registry.get("scale(factor=3.0, offset=1)")
  assert isinstance(fn, functools.partial)
  assert fn(2.0) == 7.0


def test_unknown_name_lists_known(registry):
  with pytest.raises(ValueError, match=r"Unknown widget 'nope'.*double, scale"):
    registry.get("nope")


def test_bad_argument_names_the_spec(registry):
  with pytest.raises(ValueError, match=r"Bad arguments in widget 'scale\(gain=2\)'"):
    registry.get("scale(gain=2)")


def test_duplicate_registration_fails(registry):
  with pytest.raises(ValueError, match="already registered"):
    registry.register("scale", scale)


def test_names_contains_iter(registry):
  assert registry.names() == ["double", "scale"]
  assert list(registry) == ["double", "scale"]
  assert "scale(factor=2.0)" in registry
  assert "nope" not in registry
  assert "1+" not in registry
