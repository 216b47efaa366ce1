"""Tests for gelujax.tasks, and the objectives and optimizers its values name: the paper's
settings, validation, losses, optimizers, batches, data."""

import dataclasses
import json
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jitted import init
from scipy import special

from gelujax import data, objectives, optimizers, tasks


def get(name, **overrides):
  return tasks.get(name).replace(**overrides)


def objective_of(spec):
  """The objective the engine builds from a task's values."""
  return objectives.make(
    spec.objective,
    weight_decay=spec.weight_decay,
    input_noise=spec.input_noise,
    crop_padding=spec.crop_padding,
  )


# --------------------------------------------------------------------------- the registry

PAPER_SETTINGS = {
  "mnist": dict(
    dataset="mnist",
    model="mlp_mnist",
    dropout=0.0,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=128,
    epochs=50,
    objective="classification",
    optimizer="adam",
  ),
  "mnist_ae": dict(
    dataset="mnist",
    data_options={"train_on_all": True},
    model="autoencoder_mnist",
    dropout=0.0,
    learning_rates=(1e-3, 1e-4),
    seeds=3,
    batch_size=64,
    epochs=250,
    objective="reconstruction",
    optimizer="adam",
  ),
  "twitter_pos": dict(
    model="mlp_twitter_pos",
    dropout=0.2,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=16,
    epochs=30,
    preprocessing=("embed_words",),
  ),
  "timit": dict(
    model="mlp_timit",
    dropout=0.5,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=5,
    batch_size=64,
    epochs=30,
    group_batches=True,
  ),
  "cifar10": dict(
    model="cifar_cnn",
    dropout=0.5,
    learning_rates=(1e-3, 1e-4, 1e-5),
    seeds=3,
    batch_size=100,
    epochs=200,
    optimizer="adam_anneal",
    preprocessing=("zca",),
    input_noise=0.15,
    crop_padding=0,
    weight_decay=0.0,
  ),
  "cifar100": dict(
    data_options={"train_on_all": True},
    model="wrn_40_4",
    dropout=0.3,
    learning_rates=(0.1,),
    seeds=3,
    batch_size=128,
    epochs=50,
    optimizer="nesterov_cosine",
    weight_decay=5e-4,
    preprocessing=("pixel_mean", "flip_double"),
    crop_padding=4,
    input_noise=0.0,
  ),
}


@pytest.mark.parametrize("name", sorted(PAPER_SETTINGS))
def test_paper_settings(name):
  spec = tasks.get(name)
  assert spec.name == name
  assert spec.activation == "gelu_tanh"
  for field, value in PAPER_SETTINGS[name].items():
    assert getattr(spec, field) == value, field


def test_task_names_and_datasets():
  assert set(tasks.task_names()) >= {*PAPER_SETTINGS, "tiny_mnist"}
  for name in ("mnist", "mnist_ae"):
    assert tasks.get(name).datasets == ("mnist", "fashion_mnist")
  for name in ("cifar10", "cifar100", "timit", "twitter_pos"):
    assert tasks.get(name).datasets == (name,)
  assert get("mnist", dataset="fashion_mnist").dataset == "fashion_mnist"


def test_tiny_mnist_is_small():
  spec = tasks.get("tiny_mnist")
  assert spec.epochs == 2 and spec.model == "mlp_tiny" and spec.dataset == "mnist"


def test_get_with_overrides_and_unknown_names():
  spec = tasks.get("mnist(dropout=0.5, learning_rates=(1e-3,), activation='relu')")
  assert (spec.dropout, spec.learning_rates, spec.activation) == (0.5, (1e-3,), "relu")
  assert tasks.get("mnist").dropout == 0.0  # the registered spec is untouched
  with pytest.raises(ValueError, match=r"Unknown task 'nope'.*cifar10, cifar100, mnist"):
    tasks.get("nope")


def test_build_model_uses_activation_dropout_and_options():
  model = get("mnist", activation="relu", dropout=0.5).build_model()
  assert (model.dropout, tuple(model.features)) == (0.5, (128,) * 8)
  x = np.linspace(-2, 2, 9, dtype=np.float32)
  np.testing.assert_array_equal(model.activation(x), np.maximum(x, 0))  # the callable, resolved
  wrn = get("cifar100", model_options={"width": 2}).build_model()
  assert (wrn.depth, wrn.width, wrn.dropout) == (40, 2, 0.3)
  assert tasks.get("timit").build_model().num_outputs == 39
  assert get("mnist").build_model().dtype == jnp.float32
  assert get("cifar10", dtype="bfloat16").build_model().dtype == jnp.bfloat16


# ---------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
  ("field", "value", "valid"),
  [
    ("learning_rates", (1e-3, 0.0), "each > 0 and normal in float32"),
    ("learning_rates", (), "each > 0 and normal in float32"),
    ("batch_size", 0, "integer >= 1"),
    ("batch_size", 1.5, "integer >= 1"),
    ("epochs", 0, "integer from 1 to 100,000"),
    ("epochs", 100_001, r"integer from 1 to 100,000 \(a bound against mistyped counts"),
    ("seeds", True, "integer >= 1"),
    ("evals_per_epoch", -1, "integer >= 1"),
    ("dropout", 1.0, r"\[0, 1\)"),
    ("dropout", -0.1, r"\[0, 1\)"),
    ("dropout", float("nan"), r"\[0, 1\)"),
    ("dataset", "cifar10", "mnist, fashion_mnist"),
    ("model", "resnet", "mlp_mnist"),
    ("activation", "swish", "gelu_tanh"),
    ("objective", "regression", "classification, reconstruction"),
    ("optimizer", "rmsprop", "adam, adam_anneal, adamw_cosine, nesterov_cosine"),
    ("select_metric", "validation_accuracy", "validation, test"),
    ("weight_decay", -1e-4, ">= 0"),
    ("input_noise", -0.1, ">= 0"),
    ("crop_padding", 2.0, "integer"),
    ("preprocessing", ("zca", "sharpen"), "embed_words"),
    ("group_batches", 1, "True or False"),
    ("data_options", None, "dict"),
    ("dropout_bits", "mt19937", "hash, threefry"),
    ("dtype", "float16", "float32, bfloat16"),
  ],
)
def test_replace_rejects_bad_values(field, value, valid):
  pattern = rf"field '{field}' = .* is not valid; expected .*{valid}"
  with pytest.raises(ValueError, match=pattern):
    tasks.get("mnist").replace(**{field: value})


def numpy_gaussian_gelu(x, mu, sigma):
  return x * special.ndtr((x - mu) / sigma)


# Each spec's activation in float64, given the layer's parameters (learnable_gelu's own).
ACTIVATION_SPECS = {
  "gaussian_gelu(mu=0.5, sigma=2.0)": lambda x, p: numpy_gaussian_gelu(x, 0.5, 2.0),
  "learnable_gelu(per_feature=True)": lambda x, p: numpy_gaussian_gelu(
    x, p["mu"], np.exp(p["log_sigma"])
  ),
  "elu": lambda x, p: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
}


@pytest.mark.parametrize("activation", list(ACTIVATION_SPECS))
def test_activation_specs_with_arguments(activation):
  """The model the task builds applies the spec's activation, arguments included, after each
  hidden layer: its outputs against a float64 NumPy forward pass of the same parameters."""
  spec = get("mnist", activation=activation)
  model = spec.build_model()
  assert callable(model.activation)  # Resolved where the task built the model, not a name.
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (4, 28, 28, 1)).astype(np.uint8)
  inputs, _ = objective_of(spec).prepare_batch(
    {"inputs": images, "targets": np.zeros(4, np.int32)}, False, None
  )
  params = init(model, inputs)["params"]
  # Learnable parameters away from their initial (0, 1), one per feature.
  params = {
    k: {"learnable_gelu": {n: rng.normal(size=v.shape).astype(np.float32) * 0.5
                           for n, v in layer["learnable_gelu"].items()}}
    if k.startswith("Activation") else layer
    for k, layer in params.items()
  }  # fmt: skip
  outputs = model.apply({"params": params}, inputs, train=False)
  x = images.reshape(4, -1) / 255.0
  layers = sorted(k for k in params if k.startswith("Dense"))
  for i, name in enumerate(layers):
    x = x @ np.float64(params[name]["kernel"]) + params[name]["bias"]
    if i < len(layers) - 1:
      learnable = params.get(f"Activation_{i}", {}).get("learnable_gelu")
      x = ACTIVATION_SPECS[activation](x, jax.tree.map(np.float64, learnable))
  chex.assert_trees_all_close(np.asarray(outputs, np.float64), x, rtol=1e-4, atol=1e-5)


def test_activation_arguments_are_checked():
  with pytest.raises(ValueError, match=r"field 'activation' = 'gaussian_gelu\(tau=1.0\)'"):
    get("mnist", activation="gaussian_gelu(tau=1.0)")


def test_replace_rejects_unknown_fields_and_bad_model_options():
  with pytest.raises(ValueError, match=r"has no field 'lr'\. The fields are name, dataset"):
    tasks.get("mnist").replace(lr=0.1)
  with pytest.raises(ValueError, match=r"has no field 'optimiser'\. Did you mean optimizer\? The"):
    tasks.get("mnist").replace(optimiser="adam")
  with pytest.raises(ValueError, match=r"model='mlp_mnist'.*model_options=\{'depth': 3\}"):
    tasks.get("mnist").replace(model_options={"depth": 3})


def test_select_metric_follows_objective():
  assert get("mnist", select_metric="validation_error").select_metric == "validation_error"
  with pytest.raises(ValueError, match="select_metric"):
    get("mnist_ae", select_metric="validation_error")
  assert tasks.get("mnist_ae").metric_names == ("loss",)
  assert tasks.get("mnist").metric_names == ("loss", "error")


def test_replace_normalises_and_hashes():
  spec = get("mnist", learning_rates=[1e-3, 1e-4], data_options={"train_on_all": True})
  assert spec.learning_rates == (1e-3, 1e-4)
  same = get("mnist", learning_rates=(1e-3, 1e-4), data_options={"train_on_all": True})
  assert spec == same and hash(spec) == hash(same)
  assert hash(spec) != hash(tasks.get("mnist"))
  # A spec is plain data: it round-trips through JSON (config.json) to an equal spec.
  loaded = tasks.TaskSpec(**json.loads(json.dumps(dataclasses.asdict(spec))))
  assert loaded == spec


# ----------------------------------------------------------------------- loss and metrics


def np_cross_entropy(logits, targets):
  logits = logits.astype(np.float64)
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  return -log_probs[np.arange(len(targets)), targets]


def test_classification_loss_and_metrics_with_mask():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(7, 5)).astype(np.float32) * 3
  targets = rng.integers(0, 5, size=7).astype(np.int32)
  targets[:2] = logits[:2].argmax(axis=1)  # some right
  mask = np.array([1, 1, 0, 1, 1, 0, 1], np.float32)
  spec = tasks.get("mnist")
  ce = np_cross_entropy(logits, targets)
  wrong = logits.argmax(axis=1) != targets
  np.testing.assert_allclose(
    objective_of(spec).loss(logits, targets, mask), (ce * mask).sum() / 5, rtol=1e-5
  )
  metrics = objective_of(spec).metrics(logits, targets, mask)
  assert set(metrics) == {"loss", "error"}
  np.testing.assert_allclose(metrics["loss"], (ce * mask).sum(), rtol=1e-5)
  assert float(metrics["error"]) == float((wrong * mask).sum())
  # A boolean mask means the same; an empty mask gives 0, not NaN.
  np.testing.assert_allclose(
    objective_of(spec).loss(logits, targets, mask > 0), (ce * mask).sum() / 5, rtol=1e-5
  )
  assert float(objective_of(spec).loss(logits, targets, np.zeros(7, np.float32))) == 0.0


def test_reconstruction_loss_is_per_example_mse():
  rng = np.random.default_rng(1)
  outputs = rng.normal(size=(4, 6, 6, 1)).astype(np.float32)
  targets = rng.uniform(size=(4, 6, 6, 1)).astype(np.float32)
  mask = np.array([1, 0, 1, 1], np.float32)
  spec = tasks.get("mnist_ae")
  per_example = ((outputs.astype(np.float64) - targets) ** 2).reshape(4, -1).mean(axis=1)
  np.testing.assert_allclose(
    objective_of(spec).loss(outputs, targets, mask), per_example[[0, 2, 3]].mean(), 1e-5
  )
  metrics = objective_of(spec).metrics(outputs, targets, mask)
  assert set(metrics) == {"loss"}
  np.testing.assert_allclose(metrics["loss"], per_example[[0, 2, 3]].sum(), rtol=1e-5)


# ----------------------------------------------------------------------- prepare_batch


def test_prepare_batch_scales_uint8_and_keeps_float():
  images = np.arange(2 * 28 * 28, dtype=np.int64).reshape(2, 28, 28, 1) % 256
  batch = {"inputs": jnp.asarray(images, jnp.uint8), "targets": jnp.array([3, 7], jnp.int32)}
  spec = tasks.get("mnist")
  for train in (False, True):
    inputs, targets = objective_of(spec).prepare_batch(batch, train, jax.random.key(0))
    assert inputs.dtype == jnp.float32
    np.testing.assert_allclose(inputs, images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(targets, [3, 7])
  floats = {"inputs": jnp.full((3, 286), 2.5), "targets": jnp.zeros(3, jnp.int32)}
  inputs, _ = objective_of(tasks.get("timit")).prepare_batch(floats, True, jax.random.key(0))
  np.testing.assert_array_equal(inputs, floats["inputs"])


def test_prepare_batch_autoencoder_targets_are_inputs():
  images = jnp.asarray(np.random.default_rng(3).integers(0, 256, (4, 28, 28, 1)), jnp.uint8)
  inputs, targets = objective_of(tasks.get("mnist_ae")).prepare_batch(
    {"inputs": images}, True, jax.random.key(0)
  )
  np.testing.assert_array_equal(inputs, targets)
  np.testing.assert_allclose(targets, np.asarray(images) / 255.0, rtol=1e-6)


def test_prepare_batch_gaussian_noise_statistics():
  spec = tasks.get("cifar10")
  clean = jnp.zeros((64, 32, 32, 3), jnp.float32)
  batch = {"inputs": clean, "targets": jnp.zeros(64, jnp.int32)}
  prepare = jax.jit(objective_of(spec).prepare_batch, static_argnums=1)
  noisy, _ = prepare(batch, True, jax.random.key(1))
  noise = np.asarray(noisy, np.float64)
  assert abs(noise.mean()) < 3 * 0.15 / math.sqrt(noise.size)  # ~0.0012
  assert abs(noise.std() - 0.15) < 0.002
  # Every example has its own draw; another key gives another draw; evaluation adds nothing.
  per_example_std = noise.reshape(64, -1).std(axis=1)
  np.testing.assert_allclose(per_example_std, 0.15, rtol=0.05)
  assert np.abs(noise[0] - noise[1]).mean() > 0.1
  other, _ = prepare(batch, True, jax.random.key(2))
  assert np.abs(np.asarray(other) - noise).mean() > 0.1
  evaluated, _ = prepare(batch, False, None)
  np.testing.assert_array_equal(evaluated, clean)


def test_prepare_batch_random_crops_are_shifts_of_the_padded_image():
  spec = tasks.get("cifar100")
  rng = np.random.default_rng(4)
  images = rng.normal(size=(32, 32, 32, 3)).astype(np.float32)
  batch = {"inputs": jnp.asarray(images), "targets": jnp.zeros(32, jnp.int32)}
  prepare = jax.jit(objective_of(spec).prepare_batch, static_argnums=1)
  crops, _ = prepare(batch, True, jax.random.key(5))
  chex.assert_shape(crops, (32, 32, 32, 3))
  padded = np.pad(images, ((0, 0), (4, 4), (4, 4), (0, 0)))
  offsets = set()
  for i in range(32):
    matches = [
      (dy, dx)
      for dy in range(9)
      for dx in range(9)
      if np.array_equal(np.asarray(crops[i]), padded[i, dy : dy + 32, dx : dx + 32])
    ]
    assert len(matches) == 1, i  # random images: exactly one shift reproduces the crop
    offsets.add(matches[0])
  assert len(offsets) > 10  # per-example offsets, spread over the 81 positions
  evaluated, _ = prepare(batch, False, None)
  np.testing.assert_array_equal(evaluated, images)


# ---------------------------------------------------------------------------- regularizer


def test_regularizer_sums_kernels_and_bn_scales_only():
  spec = get("cifar100", model="wrn_tiny")
  model = spec.build_model()
  shapes = jax.eval_shape(
    lambda: model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 3)), train=False)
  )["params"]
  rng = np.random.default_rng(6)
  params = jax.tree_util.tree_map(lambda s: rng.normal(size=s.shape).astype(np.float32), shapes)

  expected, decayed = 0.0, 0
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    module, name = path[-2].key, path[-1].key
    if (module.startswith(("Conv", "Dense")) and name == "kernel") or (
      module.startswith("BatchNorm") and name == "scale"
    ):
      expected += np.sum(leaf.astype(np.float64) ** 2)
      decayed += 1
  # wrn_tiny: stem conv + 3 blocks x (2 convs + projection) + dense = 11 kernels; BN scales:
  # 2 in the stem, 1 per block, 1 in the head = 6.
  assert decayed == 11 + 6
  np.testing.assert_allclose(objective_of(spec).regularizer(params), 5e-4 * expected, rtol=1e-5)
  # Biases and BN offsets do not count.
  shifted = jax.tree_util.tree_map_with_path(
    lambda path, x: x + 1.0 if path[-1].key == "bias" else x, params
  )
  np.testing.assert_allclose(objective_of(spec).regularizer(shifted), 5e-4 * expected, rtol=1e-5)
  assert float(objective_of(tasks.get("mnist")).regularizer(params)) == 0.0


# ------------------------------------------------------------------ host-side preprocessing


def fake_loader(monkeypatch, splits, calls):
  def load(name, data_dir=None, **options):
    calls.append((name, data_dir, options))
    return splits

  monkeypatch.setattr(data, "load", load)


def test_load_data_pixel_mean_and_flip_double(monkeypatch):
  rng = np.random.default_rng(7)
  train = rng.integers(0, 256, (6, 4, 5, 3)).astype(np.uint8)
  test = rng.integers(0, 256, (2, 4, 5, 3)).astype(np.uint8)
  splits = data.Splits(
    {
      "train": {"inputs": train, "targets": np.arange(6, dtype=np.int32)},
      "test": {"inputs": test, "targets": np.arange(2, dtype=np.int32)},
    },
    {"num_classes": 100},
  )
  calls = []
  fake_loader(monkeypatch, splits, calls)
  out = tasks.get("cifar100").load_data("/somewhere")
  assert calls == [("cifar100", "/somewhere", {"train_on_all": True})]
  mean = (train / 255.0).mean(axis=0)
  expected_train = train / 255.0 - mean
  np.testing.assert_allclose(out["train"]["inputs"][:6], expected_train, atol=1e-6)
  np.testing.assert_allclose(out["train"]["inputs"][6:], expected_train[:, :, ::-1], atol=1e-6)
  np.testing.assert_array_equal(out["train"]["targets"], np.tile(np.arange(6), 2))
  np.testing.assert_allclose(out["test"]["inputs"], test / 255.0 - mean, atol=1e-6)
  assert out["test"]["inputs"].shape == (2, 4, 5, 3)


def test_load_data_zca_whitens_with_train_statistics(monkeypatch):
  rng = np.random.default_rng(8)
  mixing = np.eye(48) + 0.3 * rng.normal(size=(48, 48)) / np.sqrt(48)
  raw = rng.normal(size=(600, 48)) @ mixing
  pixels = np.clip(127.5 + 20 * raw / raw.std(), 0, 255).astype(np.uint8)
  images = pixels.reshape(600, 4, 4, 3)
  splits = data.Splits(
    {
      "train": {"inputs": images[:500], "targets": np.zeros(500, np.int32)},
      "test": {"inputs": images[500:], "targets": np.zeros(100, np.int32)},
    },
    {"num_classes": 10},
  )
  fake_loader(monkeypatch, splits, [])
  out = tasks.get("cifar10").load_data()
  # Reference in float64: (x - 127.5)/128, then U diag(1/sqrt(s + 1e-5)) U^T of the train
  # covariance (ZCA is the symmetric whitening).
  x = (pixels.astype(np.float64) - 127.5) / 128
  mean = x[:500].mean(axis=0)
  s, u = np.linalg.eigh(np.cov(x[:500] - mean, rowvar=False, bias=True))
  whitening = u @ np.diag(1 / np.sqrt(s + 1e-5)) @ u.T
  expected = ((x - mean) @ whitening).reshape(600, 4, 4, 3)
  assert out["train"]["inputs"].dtype == np.float32
  np.testing.assert_allclose(out["train"]["inputs"], expected[:500], atol=2e-3)
  np.testing.assert_allclose(out["test"]["inputs"], expected[500:], atol=2e-3)
  cov = np.cov(out["train"]["inputs"].reshape(500, -1), rowvar=False, bias=True)
  np.testing.assert_allclose(cov, np.eye(48), atol=1e-2)


@pytest.mark.parametrize("pretrained", [True, False])
def test_load_data_embeds_word_windows(monkeypatch, pretrained):
  vocab = ["</s>", "UUUNKKK", "lol", "the", "cat"]
  table = np.arange(5 * 50, dtype=np.float32).reshape(5, 50) if pretrained else None
  ids = np.array([[0, 3, 4], [3, 4, 0], [1, 2, 0]], np.int32)
  splits = data.Splits(
    {"train": {"inputs": ids, "targets": np.array([11, 0, 10], np.int32)}},
    {
      "num_classes": 25,
      "vocab": vocab,
      "tags": list("NOS^ZLMVAR!DP&TXY#@~UE$,G"),
      "embeddings": table,
    },
  )
  splits.info["embeddings"] = table
  fake_loader(monkeypatch, splits, [])
  out = tasks.get("twitter_pos").load_data()
  inputs = out["train"]["inputs"]
  assert inputs.shape == (3, 150) and inputs.dtype == np.float32
  used = table if pretrained else inputs.reshape(9, 50)[[0, 6, 7, 1, 2]]
  if pretrained:
    np.testing.assert_array_equal(inputs[0], np.concatenate([table[0], table[3], table[4]]))
  # The same word gets the same vector wherever it appears; different words differ.
  windows = inputs.reshape(3, 3, 50)
  np.testing.assert_array_equal(windows[0, 1], windows[1, 0])  # "the"
  np.testing.assert_array_equal(windows[0, 0], windows[1, 2])  # "</s>"
  assert len({tuple(row) for row in used}) == 5
  if not pretrained:  # a frozen N(0, 1) substitute
    assert abs(inputs.std() - 1) < 0.2
  # Frozen and deterministic: loading again gives the same vectors.
  splits["train"]["inputs"] = ids
  np.testing.assert_array_equal(tasks.get("twitter_pos").load_data()["train"]["inputs"], inputs)


def test_twitter_pos_end_to_end_with_pretrained_embeddings(tmp_path):
  tweets = {
    "oct27.train": "lol\t!\nthe\tD\ncat\tN\n\nthe\tD\n",
    "oct27.dev": "cat\tN\nzzz\tN\n",
    "oct27.test": "lol\t!\n",
  }
  for name, text in tweets.items():
    (tmp_path / name).write_text(text, encoding="utf-8")
  words = ["</s>", "UUUNKKK", "lol", "the", "cat"]
  vectors = {w: np.arange(50, dtype=np.float32) + 100 * i for i, w in enumerate(words)}
  lines = [f"{w} {' '.join(str(v) for v in vectors[w])}" for w in words]
  (tmp_path / "vectors.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")

  spec = get("twitter_pos", data_options={"embeddings": str(tmp_path / "vectors.txt")})
  splits = spec.load_data(str(tmp_path))

  def window(*ws):
    return np.concatenate([vectors[w] for w in ws])

  train = splits["train"]["inputs"]
  assert train.shape == (4, 150) and train.dtype == np.float32
  np.testing.assert_array_equal(train[0], window("</s>", "lol", "the"))
  np.testing.assert_array_equal(train[2], window("the", "cat", "</s>"))
  np.testing.assert_array_equal(train[3], window("</s>", "the", "</s>"))
  # An unknown word maps to UUUNKKK's vector.
  np.testing.assert_array_equal(splits["validation"]["inputs"][1], window("cat", "UUUNKKK", "</s>"))
  np.testing.assert_array_equal(splits["train"]["targets"], [10, 11, 0, 11])


# ------------------------------------------------------------------ the pieces compose

# What each task's load_data yields per example (after host-side preprocessing), and the
# shape of the model's output per example.
EXAMPLE_INPUTS = {
  "mnist": ((28, 28, 1), jnp.uint8, (10,)),
  "mnist_ae": ((28, 28, 1), jnp.uint8, (28, 28, 1)),
  "tiny_mnist": ((28, 28, 1), jnp.uint8, (10,)),
  "twitter_pos": ((150,), jnp.float32, (25,)),
  "timit": ((286,), jnp.float32, (39,)),
  "cifar10": ((32, 32, 3), jnp.float32, (10,)),
  "cifar100": ((32, 32, 3), jnp.float32, (100,)),
  "tiny_cifar": ((32, 32, 3), jnp.uint8, (10,)),
  "vit_fashion_mnist": ((28, 28, 1), jnp.uint8, (10,)),
  "vit_cifar10": ((32, 32, 3), jnp.float32, (10,)),
}


def train_step(spec, batch, key):
  """A trainer-like step: prepare, forward (BN state mutable), loss + L2, grads, update."""
  model = spec.build_model()
  init_key, dropout_key, batch_key = jax.random.split(key, 3)
  inputs, targets = objective_of(spec).prepare_batch(batch, True, batch_key)
  variables = model.init(init_key, inputs, train=False)
  optimizer = optimizers.build(
    spec.optimizer, jnp.float32(1e-3), epochs=spec.epochs, steps_per_epoch=7
  )

  def objective(params):
    outputs, _ = model.apply(
      {**variables, "params": params},
      inputs,
      train=True,
      rngs={"dropout": dropout_key},
      mutable=["batch_stats"],
    )
    mask = jnp.ones(len(outputs))
    return objective_of(spec).loss(outputs, targets, mask) + objective_of(spec).regularizer(
      params
    ), outputs

  (loss, outputs), grads = jax.value_and_grad(objective, has_aux=True)(variables["params"])
  updates, _ = optimizer.update(grads, optimizer.init(variables["params"]), variables["params"])
  return loss, outputs, optax.apply_updates(variables["params"], updates)


@pytest.mark.parametrize("name", sorted(EXAMPLE_INPUTS))
def test_task_pieces_compose(name):
  spec = tasks.get(name)
  shape, dtype, output_shape = EXAMPLE_INPUTS[name]
  batch = {
    "inputs": jax.ShapeDtypeStruct((4, *shape), dtype),
    "targets": jax.ShapeDtypeStruct((4,), jnp.int32),
  }
  # Traced abstractly (no compilation): shapes and dtypes must fit end to end.
  loss, outputs, params = jax.eval_shape(
    lambda batch: train_step(spec, batch, jax.random.key(0)), batch
  )
  assert loss.shape == () and loss.dtype == jnp.float32
  assert outputs.shape == (4, *output_shape)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(params))


@pytest.mark.slow
def test_tiny_mnist_step_lowers_the_loss():
  spec = tasks.get("tiny_mnist")
  rng = np.random.default_rng(9)
  batch = {
    "inputs": jnp.asarray(rng.integers(0, 256, (16, 28, 28, 1)), jnp.uint8),
    "targets": jnp.asarray(rng.integers(0, 10, 16), jnp.int32),
  }
  loss, _, params = jax.jit(lambda b: train_step(spec, b, jax.random.key(0)))(batch)
  inputs, targets = objective_of(spec).prepare_batch(batch, False, None)
  after = spec.build_model().apply({"params": params}, inputs, train=False)
  assert float(objective_of(spec).loss(after, targets, jnp.ones(16))) < float(loss)


def test_the_tweet_taggers_epochs_come_from_its_timing_trial():
  """`EPOCHS_TAGGER` and the figures its docstring cites are those of the committed timing
  trial (benchmarks/results/members_cpu_tagger.json): 10 members looped as this CPU's rule
  takes them, at its ms a step and steps an epoch, train in 10 to 15 minutes of steps."""
  import json
  import pathlib

  report = (
    pathlib.Path(__file__).resolve().parents[1] / "benchmarks/results/members_cpu_tagger.json"
  )
  (ten,) = [c for c in json.loads(report.read_text())["configs"] if c["members"] == 10]
  looped = ten["strategies"]["map"]
  minutes = looped["step_ms"] / 1000 * looped["steps_per_epoch"] * tasks.EPOCHS_TAGGER / 60
  assert 10 <= minutes <= 15
  doc = tasks.transformer_twitter_pos_task.__doc__
  assert f"take {looped['step_ms']:.0f} ms a step" in doc
  assert (
    f"is {looped['steps_per_epoch']} steps" in doc
    and f"``EPOCHS_TAGGER`` = {tasks.EPOCHS_TAGGER}" in doc
  )
  assert f"{minutes:.0f} minutes of steps" in doc
