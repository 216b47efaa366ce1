"""Tests for gelujax.models: parameter counts by hand, initialisation, activation, dropout, BN."""

import functools
import itertools
import math

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.errors import InvalidRngError
from jitted import init, jit

import gelujax
from gelujax import models, tasks
from gelujax.conv import conv_general_dilated
from gelujax.linen import make_activation
from gelujax.models import (
  MLP,
  MODELS,
  WideResNet,
  WideResNetBlock,
  gated_features,
  unit_norm_init,
)


def np_gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def np_relu(x):
  return np.maximum(x, 0)


NP_ACTIVATIONS = {"gelu_tanh": np_gelu_tanh, "relu": np_relu}


def count(tree):
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(tree))


def abstract_variables(model, shape):
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(shape), train=False))


def dense_params(fan_in, fan_out, bias=True):
  return fan_in * fan_out + (fan_out if bias else 0)


def conv_params(kernel, fan_in, fan_out, bias):
  return kernel * kernel * fan_in * fan_out + (fan_out if bias else 0)


def bn_params(channels):
  return 2 * channels  # scale and offset; the running mean and var are batch_stats.


# ------------------------------------------------------------------ parameter counts by hand


def test_mlp_mnist_parameter_count():
  # 784 -> 128, seven 128 -> 128, 128 -> 10; weights plus biases.
  expected = (784 * 128 + 128) + 7 * (128 * 128 + 128) + (128 * 10 + 10)
  assert expected == 217_354
  assert count(abstract_variables(MODELS.get("mlp_mnist")(), (1, 28, 28, 1))) == expected


def test_mlp_mnist_gated_keeps_the_parameter_count_within_the_rounding():
  # Gated: 784 -> 2x80 (value, gate), seven 80 -> 2x80, 80 -> 10.
  expected = (784 * 160 + 160) + 7 * (80 * 160 + 160) + (80 * 10 + 10)
  assert expected == 217_130  # the ungated mlp_mnist: 217,354 (224 fewer)
  # One unit more or less moves the count by ~4000, farther from 217,354:
  assert (784 * 162 + 162) + 7 * (81 * 162 + 162) + (81 * 10 + 10) == 220_978
  assert (784 * 158 + 158) + 7 * (79 * 158 + 158) + (79 * 10 + 10) == 213_310
  # ... and Shazeer's 2/3 of 128, 85, would not keep it in this stack:
  assert (784 * 170 + 170) + 7 * (85 * 170 + 170) + (85 * 10 + 10) == 236_650
  variables = abstract_variables(MODELS.get("mlp_mnist_gated")(), (1, 28, 28, 1))
  assert count(variables) == expected
  shapes = [variables["params"][f"Dense_{i}"]["kernel"].shape for i in range(9)]
  assert shapes == [(784, 160), *[(80, 160)] * 7, (80, 10)]
  # The engine builds it by name, or mlp_mnist with the model option.
  for name in ("mnist(model='mlp_mnist_gated')", "mnist(model_options={'gated': True})"):
    model = tasks.get(name).build_model()
    assert count(abstract_variables(model, (1, 28, 28, 1))) == expected


def test_gated_widths_follow_shazeer_in_a_block_and_keep_counts_in_a_stack():
  # One feed-forward block d -> d_ff -> d: 2/3 of the width (2048 * 2 / 3 = 1365.3).
  assert gated_features((2048,), 512, 512) == (1365,)
  # mlp_tiny: 784 -> 16 -> 16 -> 10, 13,002 parameters; gated 8 + 8: 12,794 (9 + 9: 14,410).
  assert gated_features((16, 16), 784, 10) == (8, 8)
  ungated = (784 * 16 + 16) + (16 * 16 + 16) + (16 * 10 + 10)
  gated = (784 * 16 + 16) + (8 * 16 + 16) + (8 * 10 + 10)
  assert (ungated, gated) == (13_002, 12_794)
  assert count(abstract_variables(MODELS.get("mlp_tiny_gated")(), (1, 784))) == gated
  # Uneven widths are scaled by one factor: 100 -> 100 -> 50 -> 100 (20,250 parameters) gated
  # as 63 and 32 (100 * 126 + 126 + 63 * 64 + 64 + 32 * 100 + 100 = 20,122).
  assert gated_features((100, 50), 100, 100) == (63, 32)


@pytest.mark.parametrize("activation", ["gelu_tanh", "relu"])
def test_gated_mlp_matches_numpy_value_first_gate_second(activation):
  model = MLP(features=(6, 6), num_outputs=5, activation=activation, gated=True)
  x = np.random.default_rng(0).normal(size=(6, 4, 5)).astype(np.float32)
  params = jax.tree_util.tree_map(lambda p: p + 0.1, init(model, x)["params"])
  widths = gated_features((6, 6), 20, 5)
  h = x.reshape(6, -1).astype(np.float64)
  for i, width in enumerate(widths):
    z = h @ np.asarray(params[f"Dense_{i}"]["kernel"], np.float64) + params[f"Dense_{i}"]["bias"]
    assert z.shape[-1] == 2 * width
    h = z[:, :width] * NP_ACTIVATIONS[activation](z[:, width:])
  last = params[f"Dense_{len(widths)}"]
  expected = h @ np.asarray(last["kernel"], np.float64) + np.asarray(last["bias"])
  out = model.apply({"params": params}, x, train=False)
  np.testing.assert_allclose(out, expected, atol=1e-5)


def test_mlp_twitter_pos_parameter_count():
  expected = (150 * 256 + 256) + (256 * 256 + 256) + (256 * 25 + 25)
  assert expected == 110_873
  assert count(abstract_variables(MODELS.get("mlp_twitter_pos")(), (1, 150))) == expected


def test_mlp_timit_parameter_count():
  expected = (286 * 2048 + 2048) + 4 * (2048 * 2048 + 2048) + (2048 * 39 + 39)
  assert expected == 17_453_095
  assert count(abstract_variables(MODELS.get("mlp_timit")(), (1, 286))) == expected


def test_autoencoder_parameter_count_and_layers():
  widths = [784, 1000, 500, 250, 30, 250, 500, 1000, 784]
  expected = sum(a * b + b for a, b in itertools.pairwise(widths))
  # 785000 + 500500 + 125250 + 7530 + 7750 + 125500 + 501000 + 784784
  assert expected == 2_837_314
  variables = abstract_variables(MODELS.get("autoencoder_mnist")(), (1, 28, 28, 1))
  assert count(variables) == expected
  kernels = variables["params"]["MLP_0"]
  shapes = [kernels[f"Dense_{i}"]["kernel"].shape for i in range(8)]
  assert shapes == list(itertools.pairwise(widths))


def test_cifar_cnn_parameter_count():
  convs = (
    conv_params(3, 3, 96, bias=False)  # 2592
    + 2 * conv_params(3, 96, 96, bias=False)  # 2 * 82944
    + conv_params(3, 96, 192, bias=False)  # 165888
    + 3 * conv_params(3, 192, 192, bias=False)  # 3 * 331776 (two same, one valid)
    + 2 * conv_params(1, 192, 192, bias=False)  # 2 * 36864
  )
  dense = dense_params(192, 10, bias=False)  # BN on the logits replaces the bias
  norms = 3 * bn_params(96) + 6 * bn_params(192) + bn_params(10)
  expected = convs + dense + norms
  assert (convs, dense, norms, expected) == (1_403_424, 1_920, 2_900, 1_408_244)
  variables = abstract_variables(MODELS.get("cifar_cnn")(), (1, 32, 32, 3))
  assert count(variables["params"]) == expected
  # Running mean and variance per BN channel.
  assert count(variables["batch_stats"]) == norms


def wrn_parameter_count(depth, k, num_classes):
  n = (depth - 4) // 6
  stem = conv_params(3, 3, 16, bias=False) + 2 * bn_params(16)  # conv, BN, act, BN
  total = stem
  in_channels = 16
  for channels in (16 * k, 32 * k, 64 * k):
    # First block: conv (in -> c) + conv (c -> c) + BN + 1x1 projection without bias.
    total += (
      conv_params(3, in_channels, channels, bias=True)
      + conv_params(3, channels, channels, bias=True)
      + bn_params(channels)
      + conv_params(1, in_channels, channels, bias=False)
    )
    # The other n - 1 blocks: two c -> c convs and a BN, identity shortcut.
    total += (n - 1) * (2 * conv_params(3, channels, channels, bias=True) + bn_params(channels))
    in_channels = channels
  head = bn_params(64 * k) + dense_params(64 * k, num_classes)
  return total + head


def test_wrn_40_4_parameter_count():
  # Stem 432 + 32 + 32. Stage 1: 9280 + 36928 + 128 + 1024, then 5 * (2 * 36928 + 128).
  # Stage 2: 73856 + 147584 + 256 + 8192, then 5 * (2 * 147584 + 256).
  # Stage 3: 295168 + 590080 + 512 + 32768, then 5 * (2 * 590080 + 512). Head: 512 + 25700.
  expected = (
    (432 + 32 + 32)
    + (9280 + 36928 + 128 + 1024 + 5 * (2 * 36928 + 128))
    + (73856 + 147584 + 256 + 8192 + 5 * (2 * 147584 + 256))
    + (295168 + 590080 + 512 + 32768 + 5 * (2 * 590080 + 512))
    + (512 + 25700)
  )
  assert expected == wrn_parameter_count(40, 4, 100) == 8_972_884
  variables = abstract_variables(MODELS.get("wrn_40_4")(), (1, 32, 32, 3))
  assert count(variables["params"]) == expected


def test_wrn_tiny_parameter_count():
  variables = abstract_variables(MODELS.get("wrn_tiny")(), (1, 32, 32, 3))
  assert count(variables["params"]) == wrn_parameter_count(10, 1, 10)


def test_wrn_rejects_bad_depth():
  model = WideResNet(depth=12, width=1, num_classes=10)
  with pytest.raises(ValueError, match=r"depth=12.*multiple of 6"):
    model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 3)), train=False)


def test_registry_has_paper_and_tiny_presets():
  for name in ("mlp_mnist", "mlp_twitter_pos", "mlp_timit", "autoencoder_mnist", "cifar_cnn"):
    assert name in MODELS
  for name in ("wrn_40_4", "mlp_tiny", "autoencoder_tiny", "cifar_cnn_tiny", "wrn_tiny"):
    assert name in MODELS
  assert "mlp_mnist_gated" in MODELS and "mlp_tiny_gated" in MODELS
  model = MODELS.get("wrn_40_4(width=2)")(activation="relu")
  assert (model.depth, model.width, model.num_classes, model.activation) == (40, 2, 100, "relu")


# --------------------------------------------------------------------- initialisation


def test_unit_norm_init_columns_have_unit_norm():
  w = np.asarray(unit_norm_init(jax.random.key(1), (300, 7)), np.float64)
  np.testing.assert_allclose(np.linalg.norm(w, axis=0), 1.0, rtol=1e-6)
  # The directions come from N(0, 1): entries times sqrt(fan_in) have unit variance.
  assert abs(np.std(w * np.sqrt(300)) - 1.0) < 0.05
  assert abs(np.mean(w * np.sqrt(300))) < 0.05


def test_mlp_layers_are_unit_norm_with_zero_bias():
  model = MODELS.get("mlp_mnist")()
  params = init(model, jnp.zeros((1, 784)))["params"]
  assert len(params) == 9
  for layer in params.values():
    np.testing.assert_allclose(np.linalg.norm(layer["kernel"], axis=0), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(layer["bias"], 0.0)


def test_cifar_cnn_kernels_are_glorot_uniform_without_bias():
  # 12x12 inputs: the smallest that survive two pools and the valid 3x3 conv.
  params = init(MODELS.get("cifar_cnn")(), jnp.zeros((1, 12, 12, 3)))["params"]
  kernel = np.asarray(params["Conv_4"]["kernel"])  # 3x3, 192 -> 192
  limit = math.sqrt(6 / (9 * 192 + 9 * 192))
  assert np.abs(kernel).max() <= limit
  assert abs(np.var(kernel) - limit**2 / 3) < 0.02 * limit**2
  for name, layer in params.items():
    if name.startswith(("Conv", "Dense")):
      assert set(layer) == {"kernel"}, name


def test_wrn_conv_kernels_are_he_normal():
  block = WideResNetBlock(features=256, strides=2, project=True)
  params = init(block, jnp.zeros((1, 4, 4, 128)))["params"]
  kernel = np.asarray(params["Conv_1"]["kernel"])  # 256 -> 256
  assert kernel.shape == (3, 3, 256, 256)
  assert abs(np.std(kernel) / math.sqrt(2 / (9 * 256)) - 1) < 0.01
  # Untruncated normal: some entries beyond two standard deviations.
  assert np.mean(np.abs(kernel) > 2 * math.sqrt(2 / (9 * 256))) > 0.04


# ------------------------------------------------------------- forward pass vs NumPy


def np_mlp(params, x, activation):
  layers = [params[f"Dense_{i}"] for i in range(len(params))]
  h = x.reshape(len(x), -1).astype(np.float64)
  for layer in layers[:-1]:
    h = activation(h @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"]))
  return h @ np.asarray(layers[-1]["kernel"], np.float64) + np.asarray(layers[-1]["bias"])


@pytest.mark.parametrize("activation", ["gelu_tanh", "relu"])
def test_mlp_matches_numpy_and_activation_changes_function(activation):
  model = MLP(features=(32, 32), num_outputs=5, activation=activation)
  x = np.random.default_rng(0).normal(size=(6, 4, 5)).astype(np.float32)
  params = init(model, x)["params"]
  # Non-zero biases so that a wrong activation cannot hide behind symmetric pre-activations.
  params = jax.tree_util.tree_map(lambda p: p + 0.1, params)
  out = model.apply({"params": params}, x, train=False)
  np.testing.assert_allclose(out, np_mlp(params, x, NP_ACTIVATIONS[activation]), atol=1e-5)
  other = "relu" if activation == "gelu_tanh" else "gelu_tanh"
  out_other = model.clone(activation=other).apply({"params": params}, x, train=False)
  assert np.max(np.abs(out - out_other)) > 1e-2


def test_models_take_a_function_or_a_module_class_of_the_users_own():
  """As flax's examples take ``act: Callable``: a plain function is applied after every hidden
  layer (against NumPy's tanh in float64), and a Linen module class of the user's own becomes
  one submodule per layer, named after its class, given ``deterministic`` when its call takes
  it (here: its parameter scales the input in evaluation, zeroes it in training)."""

  class ScaledIdentity(nn.Module):
    @nn.compact
    def __call__(self, x, *, deterministic):
      scale = self.param("scale", nn.initializers.constant(0.5), ())
      return x * scale if deterministic else jnp.zeros_like(x)

  x = np.random.default_rng(3).normal(size=(6, 5)).astype(np.float32)
  model = MLP(features=(8, 8), num_outputs=3, activation=jnp.tanh)
  params = jax.tree_util.tree_map(lambda p: p + 0.1, init(model, x)["params"])
  out = model.apply({"params": params}, x, train=False)
  np.testing.assert_allclose(out, np_mlp(params, x, np.tanh), atol=1e-5)

  model = MLP(features=(8, 8), num_outputs=3, activation=ScaledIdentity)
  params = init(model, x)["params"]
  assert [params[f"Activation_{i}"]["scaled_identity"]["scale"] for i in (0, 1)] == [0.5, 0.5]
  dense = {k: v for k, v in params.items() if k.startswith("Dense")}
  np.testing.assert_allclose(
    model.apply({"params": params}, x, train=False),
    np_mlp(dense, x, lambda h: 0.5 * h),
    atol=1e-5,
  )
  trained = model.apply({"params": params}, x, train=True)  # every hidden unit zeroed
  np.testing.assert_allclose(trained, np.broadcast_to(params["Dense_2"]["bias"], (6, 3)))


def test_learnable_gelu_adds_its_parameters_per_layer():
  # mlp_tiny: 784 -> 16 -> 16 -> 10, i.e. (784*16 + 16) + (16*16 + 16) + (16*10 + 10) weights.
  base = (784 * 16 + 16) + (16 * 16 + 16) + (16 * 10 + 10)
  scalar = MODELS.get("mlp_tiny")(activation="learnable_gelu")
  per_feature = MODELS.get("mlp_tiny")(activation="learnable_gelu(per_feature=True)")
  # One (mu, log_sigma) pair per hidden layer, scalars or one per unit.
  assert count(abstract_variables(scalar, (1, 784))) == base + 2 * 2
  assert count(abstract_variables(per_feature, (1, 784))) == base + 2 * 2 * 16


def test_soi_map_is_stochastic_in_training_and_gelu_in_evaluation():
  model = MLP(features=(32, 32), num_outputs=5, activation="soi_map")
  x = np.random.default_rng(6).normal(size=(6, 8)).astype(np.float32)
  params = init(model, x)["params"]

  @jit  # one program for both keys
  def train_apply(key):
    return model.apply({"params": params}, x, train=True, rngs={"dropout": key})

  np.testing.assert_allclose(
    model.apply({"params": params}, x, train=False),
    model.clone(activation="gelu").apply({"params": params}, x, train=False),
    rtol=1e-6,
  )
  assert np.max(np.abs(train_apply(jax.random.key(1)) - train_apply(jax.random.key(2)))) > 1e-3


def test_autoencoder_matches_numpy_with_activation_on_code():
  model = MODELS.get("autoencoder_tiny")(activation="relu")
  x = np.random.default_rng(1).uniform(size=(3, 6, 6, 1)).astype(np.float32)
  params = init(model, x)["params"]
  params = jax.tree_util.tree_map(lambda p: p + 0.05, params)
  out = model.apply({"params": params}, x, train=False)
  chex.assert_shape(out, x.shape)
  mlp = params["MLP_0"]
  shapes = [mlp[f"Dense_{i}"]["kernel"].shape for i in range(4)]
  assert shapes == [(36, 16), (16, 4), (4, 16), (16, 36)]
  expected = np_mlp(mlp, x, np_relu).reshape(x.shape)
  np.testing.assert_allclose(out, expected, atol=1e-5)


# Conv presets on the smallest inputs they accept: initialised once per module, evaluated eagerly
# (compiling every variant would dominate the run time on a small CPU); their training passes are
# compiled once, at level 1 (tests/jitted.py).
CONV_INPUTS = {"cifar_cnn_tiny": (4, 12, 12, 3), "wrn_tiny": (4, 8, 8, 3)}


@functools.cache
def setup_conv_model(name):
  rng = np.random.default_rng(2)
  x = rng.normal(size=CONV_INPUTS[name]).astype(np.float32)
  model = MODELS.get(name)(activation="gelu_tanh", dropout=0.5)
  return model, random_variables(model, x, rng), x


def random_variables(model, x, rng):
  """Variables of the model's structure filled from NumPy: cheaper than compiling its init.

  Kernels are N(0, 1/fan_in); biases, BN offsets and scales are N(0, 0.1²) around 0 and 1 so
  that no term can vanish; running means are 0 and running variances 1.
  """

  def fill(path, leaf):
    name = path[-1].key
    if name == "kernel":
      fan_in = int(np.prod(leaf.shape[:-1]))
      return rng.normal(size=leaf.shape).astype(np.float32) / np.sqrt(fan_in)
    centre = 1.0 if name in ("scale", "var") else 0.0
    spread = 0.0 if name in ("mean", "var") else 0.1
    return (centre + spread * rng.normal(size=leaf.shape)).astype(np.float32)

  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), x, train=False))
  return jax.tree_util.tree_map_with_path(fill, shapes)


@pytest.fixture(params=sorted(CONV_INPUTS))
def conv_model(request):
  return setup_conv_model(request.param)


def test_conv_activation_changes_function(conv_model):
  model, variables, x = conv_model
  out = model.apply(variables, x, train=False)
  out_relu = model.clone(activation="relu").apply(variables, x, train=False)
  chex.assert_shape(out, (4, 10))
  chex.assert_tree_all_finite(out)
  assert np.max(np.abs(out - out_relu)) > 1e-3


def test_conv_dropout_only_in_training(conv_model):
  model, variables, x = conv_model

  @jit  # one program for both keys
  def train_apply(key):
    rngs = {"dropout": key}
    return model.apply(variables, x, train=True, rngs=rngs, mutable=["batch_stats"])[0]

  # Evaluation needs no dropout rng (it would raise if dropout were active) and is
  # deterministic; training draws a new mask per rng.
  np.testing.assert_array_equal(
    model.apply(variables, x, train=False), model.apply(variables, x, train=False)
  )
  assert np.max(np.abs(train_apply(jax.random.key(1)) - train_apply(jax.random.key(2)))) > 1e-3
  with pytest.raises(InvalidRngError):
    model.apply(variables, x, train=True, mutable=["batch_stats"])


def np_conv(x, kernel, stride, padding):
  """Cross-correlation in float64 with explicit symmetric zero padding, NHWC / HWIO."""
  x = np.pad(x.astype(np.float64), ((0, 0), (padding, padding), (padding, padding), (0, 0)))
  kh, kw, _, cout = kernel.shape
  out_h = (x.shape[1] - kh) // stride + 1
  out_w = (x.shape[2] - kw) // stride + 1
  out = np.zeros((x.shape[0], out_h, out_w, cout))
  for i in range(out_h):
    for j in range(out_w):
      patch = x[:, i * stride : i * stride + kh, j * stride : j * stride + kw, :]
      out[:, i, j] = np.einsum("bhwc,hwco->bo", patch, kernel)
  return out


def test_wide_resnet_block_order_matches_numpy():
  block = WideResNetBlock(features=4, strides=2, project=True, activation="gelu_tanh")
  x = np.random.default_rng(3).normal(size=(2, 6, 6, 3)).astype(np.float32)
  variables = init(block, x)
  params = jax.tree_util.tree_map(lambda p: np.asarray(p, np.float64), variables["params"])
  params["Conv_0"]["bias"] += 0.1
  params["Conv_1"]["bias"] -= 0.2
  params["BatchNorm_0"]["scale"] = params["BatchNorm_0"]["scale"] * 1.5
  params["BatchNorm_0"]["bias"] += 0.3
  out = block.apply({**variables, "params": params}, x, train=False)

  # conv3x3 (stride 2, pad 1) -> act -> conv3x3 -> act -> BN (running mean 0, var 1), plus the
  # bias-free 1x1 stride-2 projection of the input.
  y = np_gelu_tanh(np_conv(x, params["Conv_0"]["kernel"], 2, 1) + params["Conv_0"]["bias"])
  y = np_gelu_tanh(np_conv(y, params["Conv_1"]["kernel"], 1, 1) + params["Conv_1"]["bias"])
  y = y / np.sqrt(1 + 1e-4) * params["BatchNorm_0"]["scale"] + params["BatchNorm_0"]["bias"]
  shortcut = np_conv(x, params["Conv_2"]["kernel"], 2, 0)
  np.testing.assert_allclose(out, y + shortcut, atol=1e-4)


def test_cifar_cnn_shapes_and_logit_batch_norm():
  model, variables, x = setup_conv_model("cifar_cnn_tiny")
  train_apply = functools.partial(
    model.apply, train=True, mutable=["batch_stats", "intermediates"], capture_intermediates=True
  )
  out, state = jit(train_apply)(variables, x, rngs={"dropout": jax.random.key(0)})
  inter = state["intermediates"]
  # 12 -> 12 (same) -> pool 6 -> pool 3 -> valid 3x3 1 -> 1x1 1.
  chex.assert_shape(inter["Conv_2"]["__call__"][0], (4, 12, 12, 4))
  chex.assert_shape(inter["Conv_5"]["__call__"][0], (4, 6, 6, 8))
  chex.assert_shape(inter["Conv_6"]["__call__"][0], (4, 1, 1, 8))
  chex.assert_shape(inter["Conv_8"]["__call__"][0], (4, 1, 1, 8))
  logits = np.asarray(inter["Dense_0"]["__call__"][0], np.float64)
  # Training-mode BN normalises the logits with the batch statistics (epsilon 1e-4) ...
  mean, var = logits.mean(0), logits.var(0)
  bn = variables["params"]["BatchNorm_9"]
  expected = (logits - mean) / np.sqrt(var + 1e-4) * bn["scale"] + bn["bias"]
  np.testing.assert_allclose(out, expected, atol=1e-4)
  # ... and moves the running averages with momentum 0.9 from (0, 1).
  stats = state["batch_stats"]["BatchNorm_9"]
  np.testing.assert_allclose(stats["mean"], 0.1 * mean, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(stats["var"], 0.9 + 0.1 * var, rtol=1e-4)
  # In evaluation BN uses the running statistics; a running variance of the size of epsilon
  # makes epsilon's value visible.
  stats = {"mean": np.full(10, 0.3, np.float32), "var": np.full(10, 1e-4, np.float32)}
  batch_stats = {**variables["batch_stats"], "BatchNorm_9": stats}
  out, state = model.apply(
    {**variables, "batch_stats": batch_stats},
    x,
    train=False,
    mutable=["intermediates"],
    capture_intermediates=True,
  )
  logits = np.asarray(state["intermediates"]["Dense_0"]["__call__"][0], np.float64)
  expected = (logits - 0.3) / np.sqrt(1e-4 + 1e-4) * bn["scale"] + bn["bias"]
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ dropout


def test_mlp_dropout_only_in_training():
  x = np.random.default_rng(5).normal(size=(4, 28, 28, 1)).astype(np.float32)
  model = MODELS.get("mlp_tiny")(dropout=0.5)
  variables = init(model, x)

  def train_apply(m, seed):
    return m.apply(variables, x, train=True, rngs={"dropout": jax.random.key(seed)})

  evaluation = model.apply(variables, x, train=False)
  no_dropout = model.clone(dropout=0.0)
  # Evaluation is the dropout-free function; training draws a new mask per rng.
  np.testing.assert_array_equal(evaluation, no_dropout.apply(variables, x, train=False))
  np.testing.assert_array_equal(evaluation, train_apply(no_dropout, 1))
  assert np.max(np.abs(train_apply(model, 1) - train_apply(model, 2))) > 1e-3
  assert np.max(np.abs(train_apply(model, 1) - evaluation)) > 1e-3
  with pytest.raises(InvalidRngError):
    model.apply(variables, x, train=True)


def test_mlp_dropout_rate_and_scaling():
  # One hidden layer of identity-like activation inputs: with relu on positive pre-activations
  # the dropout mask is visible directly in the hidden layer.
  model = MLP(features=(4000,), num_outputs=1, activation="relu", dropout=0.3)
  x = np.ones((1, 1), np.float32)
  params = init(model, x)["params"]
  params["Dense_0"]["kernel"] = np.ones((1, 4000), np.float32)
  params["Dense_1"]["kernel"] = np.ones((4000, 1), np.float32)
  _, state = model.apply(
    {"params": params},
    x,
    train=True,
    rngs={"dropout": jax.random.key(3)},
    capture_intermediates=True,
    mutable=["intermediates"],
  )
  hidden = np.asarray(state["intermediates"]["Dropout_0"]["__call__"][0])
  kept = hidden != 0
  assert abs(kept.mean() - 0.7) < 0.03
  np.testing.assert_allclose(hidden[kept], 1 / 0.7, rtol=1e-6)


# ------------------------------------------------------------------------ convolution


def np_conv_and_grads(x, kernel, stride, pads, g):
  """NumPy float64: y = conv(x, kernel) and the gradients of sum(y * g), by shifted slices."""
  (top, bottom), (left, right) = pads
  padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
  kh, kw = kernel.shape[:2]
  out_h = (padded.shape[1] - kh) // stride + 1
  out_w = (padded.shape[2] - kw) // stride + 1
  y = np.zeros((len(x), out_h, out_w, kernel.shape[3]))
  d_padded, d_kernel = np.zeros_like(padded), np.zeros_like(kernel)
  for i, j in itertools.product(range(kh), range(kw)):
    rows = slice(i, i + stride * (out_h - 1) + 1, stride)
    cols = slice(j, j + stride * (out_w - 1) + 1, stride)
    y += padded[:, rows, cols] @ kernel[i, j]
    d_kernel[i, j] = np.einsum("bhwc,bhwo->co", padded[:, rows, cols], g)
    d_padded[:, rows, cols] += g @ kernel[i, j].T
  d_x = d_padded[:, top : top + x.shape[1], left : left + x.shape[2]]
  return y, d_x, d_kernel


@pytest.mark.parametrize(
  ("kernel_size", "stride", "padding", "pads"),
  [
    (3, 1, ((1, 1), (1, 1)), ((1, 1), (1, 1))),
    (3, 2, ((1, 1), (1, 1)), ((1, 1), (1, 1))),
    (3, 1, "VALID", ((0, 0), (0, 0))),
    (1, 2, "VALID", ((0, 0), (0, 0))),
    (3, 2, "SAME", ((0, 1), (1, 1))),  # 8 rows, 9 columns: TF's SAME pads the odd one after
  ],
)
def test_conv_value_and_gradients_match_numpy_inside_a_scan(kernel_size, stride, padding, pads):
  rng = np.random.default_rng(kernel_size + 10 * stride)
  x = rng.normal(size=(2, 8, 9, 3))
  kernel = rng.normal(size=(kernel_size, kernel_size, 3, 4))
  out_h = (8 + sum(pads[0]) - kernel_size) // stride + 1
  out_w = (9 + sum(pads[1]) - kernel_size) // stride + 1
  g = rng.normal(size=(2, out_h, out_w, 4))
  dims = jax.lax.conv_dimension_numbers(x.shape, kernel.shape, ("NHWC", "HWIO", "NHWC"))

  def value_and_grads(x, kernel):
    def objective(x, kernel):
      y = conv_general_dilated(x, kernel, (stride, stride), padding, dimension_numbers=dims)
      return jnp.sum(y * g), y

    (_, y), grads = jax.value_and_grad(objective, (0, 1), has_aux=True)(x, kernel)
    return y, *grads

  y_ref, dx_ref, dk_ref = np_conv_and_grads(x, kernel, stride, pads, g)
  with jax.enable_x64(True):
    # Inside a loop, as in the trainer's scan over steps.
    _, (y, dx, dk) = jax.lax.scan(lambda c, _: (c, value_and_grads(x, kernel)), 0, None, length=2)
  for got, want in ((y, y_ref), (dx, dx_ref), (dk, dk_ref)):
    assert got.dtype == jnp.float64
    np.testing.assert_allclose(got[1], want, rtol=1e-12, atol=1e-12)


def test_conv_other_forms_go_to_lax():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(1, 6, 6, 4)), jnp.float32)
  kernel = jnp.asarray(rng.normal(size=(3, 3, 2, 4)), jnp.float32)
  dims = jax.lax.conv_dimension_numbers(x.shape, kernel.shape, ("NHWC", "HWIO", "NHWC"))
  options = {"rhs_dilation": (2, 2), "dimension_numbers": dims, "feature_group_count": 2}
  got = jax.grad(lambda k: jnp.sum(conv_general_dilated(x, k, (1, 1), "SAME", **options) ** 2))
  want = jax.grad(
    lambda k: jnp.sum(jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", **options) ** 2)
  )
  np.testing.assert_array_equal(got(kernel), want(kernel))


@pytest.mark.slow
def test_the_vit_is_its_patches_through_the_encoder_computed_another_way():
  """`ViT` against the same computation assembled by hand from its parameters: the patches cut
  with NumPy (row-major patches, each flattened row by row), the embedding and position added,
  `gelujax.linen.Encoder` applied on its own (tested against float64 in test_transformer.py),
  the mean over patches and the head. A patch order or flattening of its own would differ."""
  from gelujax.linen import Encoder

  model = models.MODELS.get("vit_tiny")(activation=gelujax.gelu, dropout=0.0, dtype=jnp.float32)
  images = np.random.default_rng(0).random((3, 28, 28, 1)).astype(np.float32)
  variables = model.init(jax.random.key(0), images, train=False)
  params = variables["params"]
  patches = np.stack(
    [
      images[:, r : r + 7, c : c + 7, :].reshape(3, 49)
      for r in range(0, 28, 7)
      for c in range(0, 28, 7)
    ],
    axis=1,
  )
  tokens = patches @ params["embed"]["kernel"] + params["embed"]["bias"] + params["position"]
  encoder = Encoder(num_layers=1, num_heads=2, hidden_features=32, activation=gelujax.gelu)
  encoded = encoder.apply({"params": params["encoder"]}, tokens)
  expected = np.asarray(encoded).mean(axis=1) @ params["head"]["kernel"] + params["head"]["bias"]
  np.testing.assert_allclose(
    model.apply(variables, images, train=False), expected, rtol=1e-5, atol=1e-6
  )


def test_a_gated_unit_builds_the_vits_gated_feed_forward_and_is_refused_by_an_mlp():
  """`--activation=geglu` gives the ViT's blocks the gated feed-forward (a hidden layer of
  2 x 21 for the plain 32: `gelujax.gated_hidden_features`), within the rule's rounding of the
  plain block's parameters; the paper's MLP applies its activation element-wise and refuses
  a unit, naming the model that takes one."""
  from gelujax import tasks

  spec = tasks.get("vit_fashion_mnist(model='vit_tiny')")
  counts = {}
  for activation in ("gelu", "geglu"):
    model = spec.replace(activation=activation).build_model()
    params = model.init(jax.random.key(0), jnp.zeros((1, 28, 28, 1)), train=False)["params"]
    hidden = params["encoder"]["block_0"]["mlp"]["hidden"]["kernel"]
    counts[activation] = (hidden.shape, sum(x.size for x in jax.tree.leaves(params)))
  assert counts["gelu"][0] == (16, 32)
  assert counts["geglu"][0] == (16, 2 * gelujax.gated_hidden_features(16, 32))
  assert abs(counts["geglu"][1] - counts["gelu"][1]) <= (3 * 16 + 2) / 2
  with pytest.raises(ValueError, match="is a gated linear unit") as error:
    tasks.get("mnist(activation='geglu')")
  takes = (
    "(models char_gpt_cpu, char_gpt_gpu, char_gpt_tiny, transformer_tagger_tiny, "
    "transformer_twitter_pos, vit_cifar10, vit_fashion_mnist, vit_tiny; tasks char_lm, "
    "transformer_twitter_pos, vit_cifar10, vit_fashion_mnist)"
  )
  assert takes in str(error.value)


def test_vit_cifar10_parameter_count():
  """vit_cifar10 counted by hand: 64 patches of 4 x 4 x 3 = 48 values embedded to 192, a
  position per patch, 6 blocks (two LayerNorms, attention's q, k, v and out of 192 x 192 with
  biases, a feed-forward of 768), a final LayerNorm and 10 logits; geglu's gated feed-forward
  (hidden 2 x 512) has the plain one's weights and 256 more biases a block."""
  from gelujax import tasks

  w, h, patches, patch = 192, 768, 64, 4 * 4 * 3
  block = 2 * 2 * w + 4 * (w * w + w) + (w * h + h) + (h * w + w)
  plain = (patch * w + w) + patches * w + 6 * block + 2 * w + (w * 10 + 10)
  counts = {}
  for activation in ("gelu", "geglu"):
    model = tasks.get(f"vit_cifar10(activation={activation!r})").build_model()
    params = jax.eval_shape(
      lambda m=model: m.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3)), train=False)
    )["params"]
    counts[activation] = sum(x.size for x in jax.tree.leaves(params))
  assert counts == {"gelu": plain, "geglu": plain + 6 * (2 * 512 - h)}
  assert plain == 2_693_194  # the figure vit_cifar10's docstring states (2.69 million)


def test_transformer_twitter_pos_parameter_count():
  """The tweet tagger with the real Oct27 train vocabulary (5,435 words with </s> and UUUNKKK)
  on tweets padded to 38 tokens, counted by hand; a gated feed-forward (geglu) of width 170 has
  44 parameters a block fewer than the plain one of 256 (`gelujax.gated_hidden_features`)."""
  from gelujax import spelling

  block = (
    2 * 64  # attention_norm
    + 3 * (64 * 64 + 64)  # query, key, value: 4 heads of 16
    + (64 * 64 + 64)  # out
    + 2 * 64  # mlp_norm
    + (64 * 256 + 256)
    + (256 * 64 + 64)  # the feed-forward
  )
  expected = (
    5435 * 50  # the word table
    + spelling.BUCKETS * 50  # the n-gram table
    + len(spelling.FLAGS) * 50  # the flags' map
    + (50 * 64 + 64)  # project
    + 38 * 64  # position
    + 2 * block
    + 2 * 64  # final_norm
    + (64 * 25 + 25)  # head
  )
  assert expected == 789_317
  ids = jnp.zeros((1, 38, 1 + spelling.MAX_NGRAMS + len(spelling.FLAGS)), jnp.int32)
  for activation, count in (("gelu", expected), ("geglu", expected - 2 * 44)):
    model = MODELS.get("transformer_twitter_pos")(activation=make_activation(activation))
    model = model.clone(vocab_size=5435)
    params = jax.eval_shape(lambda m=model: m.init(jax.random.key(0), ids, train=False))["params"]
    assert sum(x.size for x in jax.tree.leaves(params)) == count
