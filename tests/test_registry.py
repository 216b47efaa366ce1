"""Tests for gelujax.registry."""

import functools

import pytest

import gelujax
from gelujax import data, tasks
from gelujax.models import MODELS
from gelujax.optimizers import OPTIMIZERS
from gelujax.registry import Registry, close_names, did_you_mean, parse_name, sentences
from gelujax.specs import activation_names, get_activation


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


def test_a_check_refuses_argument_values_before_the_entry_is_called(registry):
  calls = []

  def scaled(x, factor=1.0):
    calls.append(x)
    return x * factor

  registry.register(
    "scaled", scaled, check=lambda a: None if a["factor"] > 0 else f"factor {a['factor']} <= 0"
  )
  with pytest.raises(ValueError) as error:
    registry.get("scaled(factor=-2)")
  assert str(error.value) == "Bad arguments in widget 'scaled(factor=-2)': factor -2 <= 0."
  assert registry.hint("scaled(factor=-2)") == str(error.value)
  assert registry.get("scaled(factor=2)")(3) == 6 and calls == [3]
  assert registry.get("scaled") is scaled  # a bare name: the defaults, never checked

  @registry.register("halved", check=lambda a: None if a["factor"] else "factor is 0")
  def halved(x, factor=0.5):
    return x * factor

  with pytest.raises(ValueError, match=r"'halved\(factor=0\)': factor is 0\.$"):
    registry.get("halved(factor=0)")


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


# --- names that guide: the unknown name's likely meaning


def test_close_names_keeps_only_the_nearest():
  known = ["gelu", "gelu_tanh", "gelu_fast", "elu", "relu"]
  assert close_names("gelu_tahn", known) == ["gelu_tanh"]  # not gelu_fast (ratio 0.67)
  assert close_names("gelux", known) == ["gelu"]  # not elu (0.75, more than 0.05 behind 0.89)
  assert close_names("tanh", known) == []
  # Ties are all kept, in the given order: 2 * 3 matching / 8 characters = 0.75 each.
  assert close_names("abcx", ["abce", "abcd", "xyz"]) == ["abce", "abcd"]


def test_did_you_mean_and_sentences():
  assert did_you_mean([]) == ""
  assert did_you_mean(["a"]) == "Did you mean a?"
  assert did_you_mean(["a", "b", "c"]) == "Did you mean a, b or c?"
  assert sentences("One.", "", "Two.") == "One. Two."


def test_unknown_name_suggests_the_closest(registry):
  with pytest.raises(ValueError) as info:
    registry.get("scael")
  assert (
    str(info.value) == "Unknown widget 'scael'. Did you mean scale? Known widgets: double, scale."
  )
  assert registry.hint("scael(factor=2.0)") == "Did you mean scale?"
  assert registry.hint("zzz") == ""


def test_bare_name_of_an_alias_names_its_namespaced_spellings(aliased):
  aliased.alias("third:scale_twice", "scale(factor=2.0)")
  expected = (
    "'scale_twice' is another library's name, written here with its namespace: "
    "other:scale_twice (computes gelujax's scale(factor=2.0)), "
    "third:scale_twice (computes gelujax's scale(factor=2.0))."
  )
  assert aliased.hint("scale_twice") == expected
  with pytest.raises(ValueError) as info:
    aliased.get("scale_twice")
  assert (
    str(info.value) == f"Unknown widget 'scale_twice'. {expected} Known widgets: double, scale."
  )
  # A typo of an alias's name suggests the alias by its spellings.
  assert aliased.hint("scale_twise") == "Did you mean other:scale_twice or third:scale_twice?"


def test_namespaced_misses_suggest_the_alias_the_namespace_or_no_namespace(aliased):
  assert aliased.hint("other:scale_twise") == "Did you mean other:scale_twice?"
  assert aliased.hint("othre:scale_twice") == "Did you mean other:scale_twice?"
  assert aliased.hint("other:double") == (
    "'double' is gelujax's own widget; write it without a namespace."
  )
  with pytest.raises(
    ValueError, match=r"known other names: .*\. Did you mean other:scale_twice\?$"
  ):
    aliased.get("other:scale_twise")


def test_hint_explains_bad_arguments_and_syntax_and_is_empty_for_good_specs(aliased):
  assert aliased.hint("scale(gain=2)").startswith("Bad arguments in widget 'scale(gain=2)'")
  assert aliased.hint("scale(").startswith("Cannot parse 'scale('")
  for spec in ["scale", "scale(factor=2.0)", "other:scale_twice", "other:scale(mode='double')"]:
    assert aliased.hint(spec) == "", spec


@pytest.mark.parametrize(
  ("name", "spellings"),
  [
    ("gelu_new", "transformers:gelu_new (computes gelujax's gelu_tanh)"),
    (
      "quick_gelu",
      "transformers:quick_gelu (computes gelujax's gelu_sigmoid), "
      "timm:quick_gelu (computes gelujax's gelu_sigmoid)",
    ),
    ("gelu_pytorch_tanh", "transformers:gelu_pytorch_tanh (computes gelujax's gelu_tanh)"),
    ("gelu_python", "transformers:gelu_python (computes gelujax's gelu)"),
  ],
)
def test_activation_error_names_the_namespaced_alias(name, spellings):
  with pytest.raises(ValueError) as info:
    get_activation(name)
  line = f"'{name}' is another library's name, written here with its namespace: {spellings}."
  assert (
    str(info.value)
    == f"Unknown activation '{name}'. {line} Known activations: "
    + ", ".join(activation_names())
    + "."
  )


def test_a_gated_unit_given_as_an_element_wise_activation_is_named_as_one():
  """'geglu' was answered "Did you mean gelu?": it is a gated linear unit, listed by
  gated_unit_names (not activation_names), and a near miss of one is suggested by name."""
  assert gelujax.gated_unit_names() == ["gated", "geglu", "reglu", "swiglu"]
  assert not set(gelujax.gated_unit_names()) & set(activation_names())
  for spec in ("geglu", "swiglu", "geglu(approximate=True)"):
    with pytest.raises(ValueError) as info:
      get_activation(spec)
    message = str(info.value)
    assert message.startswith(f"{spec!r} is a gated linear unit (gelujax."), message
    assert "Did you mean" not in message and "gated_unit_names()" in message
  with pytest.raises(ValueError) as info:
    get_activation("swigl")
  assert str(info.value).endswith("(for a transformer's feed-forward) close to it: swiglu.")
  with pytest.raises(ValueError) as info:  # an element-wise typo: no unit is close
    get_activation("gelu_tahn")
  assert "Gated" not in str(info.value)


@pytest.mark.parametrize(
  ("lookup", "name", "suggestion"),
  [
    (get_activation, "gelu_tahn", "Did you mean gelu_tanh?"),
    (get_activation, "gelu_neww", "Did you mean transformers:gelu_new?"),
    (
      get_activation,
      "torch:relu",
      "'relu' is gelujax's own activation; write it without a namespace.",
    ),
    (get_activation, "pytorch:gelu", "Did you mean torch:gelu?"),
    (tasks.get, "mnsit", "Did you mean mnist?"),
    (tasks.get, "tiny_mnits", "Did you mean tiny_mnist?"),
    (OPTIMIZERS.lookup, "adm", "Did you mean adam?"),
    (MODELS.lookup, "mlp_mnits", "Did you mean mlp_mnist?"),
    (data.load, "fashion_mnst", "Did you mean fashion_mnist?"),
  ],
)
def test_typos_get_the_closest_names_in_every_registry(lookup, name, suggestion):
  with pytest.raises(ValueError) as info:
    lookup(name)
  assert f" {suggestion}" in str(info.value)
  assert str(info.value).count("Did you mean") <= 1
