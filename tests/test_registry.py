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


@pytest.fixture
def aliased(registry):
  registry.alias("other:scale_twice", "scale(factor=2.0)")
  registry.alias("other:scale(mode='double')", "double")
  return registry


def test_alias_resolves_to_its_target_however_spelled(aliased):
  assert aliased.get("other:scale_twice")(3.0) == 6.0
  assert aliased.get('other:scale( mode = "double" )') is aliased.get("double")
  assert aliased.resolve("other:scale_twice") == "scale(factor=2.0)"
  assert aliased.resolve("scale(factor=3.0)") == "scale(factor=3.0)"  # not an alias
  assert aliased.aliases() == {
    "other:scale_twice": "scale(factor=2.0)",
    "other:scale(mode='double')": "double",
  }
  assert "other:scale_twice" in aliased and "other:nope" not in aliased
  assert aliased.names() == ["double", "scale"]  # aliases are not names


def test_unknown_alias_lists_its_namespace_or_the_namespaces(aliased):
  with pytest.raises(ValueError, match=r"known other names: other:scale_twice, other:scale\("):
    aliased.get("other:scale(mode='triple')")
  with pytest.raises(ValueError, match=r"known other names"):
    aliased.get("other:scale(mode=[1])")
  with pytest.raises(ValueError, match=r"no aliases in namespace 'else'; known namespaces: other"):
    aliased.get("else:scale")
  with pytest.raises(ValueError, match=r"Cannot parse 'other:1\+2'"):
    aliased.get("other:1+2")


def test_alias_registration_is_checked(aliased):
  with pytest.raises(ValueError, match="needs a namespace"):
    aliased.alias("scale2", "scale")
  with pytest.raises(ValueError, match="already registered"):
    aliased.alias("other:scale_twice", "double")
  with pytest.raises(ValueError, match="Unknown widget 'nope'"):
    aliased.alias("other:x", "nope")
  with pytest.raises(ValueError, match="Bad arguments"):
    aliased.alias("other:y", "scale(gain=2)")


def test_colon_inside_arguments_is_no_namespace(registry):
  registry.register("configure", lambda x, options=None: options)
  assert registry.get("configure(options={'a': 1})").keywords == {"options": {"a": 1}}
