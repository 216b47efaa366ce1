"""Twitter POS with trainable embeddings: the EmbeddingMLP model, and its vocabulary size, which
`tasks.build` sets from the data.

The model is checked against a NumPy float64 forward and backward pass written here; the
vocabulary size against words counted by hand in ARK files; the whole path through
experiments/train.py on a fixture in the real ARK format.
"""

import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jitted import init

from gelujax import engine, tasks
from gelujax.models import MODELS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINABLE = "twitter_pos(model='embedding_mlp_twitter_pos', preprocessing=())"
C = math.sqrt(2 / math.pi)


def np_gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(C * (x + 0.044715 * x**3)))


def np_gelu_tanh_derivative(x):
  t = np.tanh(C * (x + 0.044715 * x**3))
  return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * C * (1 + 3 * 0.044715 * x**2)


def count(tree):
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(tree))


def abstract_params(model, num_words=3):
  ids = jnp.zeros((1, num_words), jnp.int32)
  return jax.eval_shape(lambda: model.init(jax.random.key(0), ids, train=False))["params"]


def given_params(model, ids, seed=0):
  """Initial parameters with every leaf shifted by a different constant, so that zero biases
  cannot hide a wrong layer."""
  params = init(model, ids, seed)["params"]
  leaves, tree = jax.tree_util.tree_flatten(params)
  return tree.unflatten([leaf + 0.05 * (i + 1) for i, leaf in enumerate(leaves)])


def np_layers(params):
  mlp = params["MLP_0"]
  return [
    (np.asarray(mlp[f"Dense_{i}"]["kernel"], np.float64), np.asarray(mlp[f"Dense_{i}"]["bias"]))
    for i in range(len(mlp))
  ]


def np_forward(params, ids):
  """Logits and the pre-activations of each hidden layer, in float64."""
  table = np.asarray(params["embedding"], np.float64)
  h = table[ids].reshape(len(ids), -1)
  layers, pre = np_layers(params), []
  for kernel, bias in layers[:-1]:
    pre.append(h @ kernel + bias)
    h = np_gelu_tanh(pre[-1])
  kernel, bias = layers[-1]
  return h @ kernel + bias, pre


def np_table_gradient(params, ids, targets):
  """d(mean softmax cross-entropy)/d(table), backpropagated by hand in float64."""
  logits, pre = np_forward(params, ids)
  p = np.exp(logits - logits.max(axis=1, keepdims=True))
  p /= p.sum(axis=1, keepdims=True)
  p[np.arange(len(ids)), targets] -= 1
  grad = p / len(ids)  # d loss / d logits
  layers = np_layers(params)
  for (kernel, _), z in zip(layers[:0:-1], pre[::-1], strict=True):
    grad = (grad @ kernel.T) * np_gelu_tanh_derivative(z)
  table = np.asarray(params["embedding"])
  grad_rows = (grad @ layers[0][0].T).reshape(*ids.shape, table.shape[1])
  out = np.zeros(table.shape, np.float64)
  np.add.at(out, ids, grad_rows)  # a word's rows add up, wherever in the window it appears
  return out


# ------------------------------------------------------------------------------- the model


def test_parameter_counts_by_hand():
  # 5,435 words (the real Oct27 train vocabulary with </s> and UUUNKKK) x 50, then the MLP.
  model = MODELS.get("embedding_mlp_twitter_pos")(vocab_size=5435)
  expected = 5435 * 50 + (150 * 256 + 256) + (256 * 256 + 256) + (256 * 25 + 25)
  assert expected == 382_623
  params = abstract_params(model)
  assert count(params) == expected
  assert params["embedding"].shape == (5435, 50)
  tiny = MODELS.get("embedding_mlp_tiny")(vocab_size=7)
  expected = 7 * 4 + (12 * 16 + 16) + (16 * 16 + 16) + (16 * 25 + 25)
  assert expected == 933
  assert count(abstract_params(tiny)) == expected


def test_table_is_standard_normal_and_dense_columns_unit_norm():
  model = MODELS.get("embedding_mlp_twitter_pos")(vocab_size=2000)
  params = init(model, jnp.zeros((1, 3), jnp.int32), seed=3)["params"]
  table = np.asarray(params["embedding"], np.float64)
  # 100,000 N(0, 1) draws: mean within 5 standard errors of 0, std within 1%.
  assert abs(table.mean()) < 5 / math.sqrt(table.size) and abs(table.std() - 1) < 0.01
  for kernel, bias in np_layers(params):
    np.testing.assert_allclose(np.linalg.norm(kernel, axis=0), 1, rtol=1e-5)
    assert not bias.any()


def test_forward_matches_numpy_float64():
  model = MODELS.get("embedding_mlp_twitter_pos")(vocab_size=40)
  ids = np.random.default_rng(1).integers(0, 40, (6, 3)).astype(np.int32)
  params = given_params(model, ids)
  out = model.apply({"params": params}, ids, train=False)
  np.testing.assert_allclose(out, np_forward(params, ids)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_table_gradient_matches_numpy_and_is_zero_off_the_batch():
  model = MODELS.get("embedding_mlp_tiny")(vocab_size=11)
  # Words 0, 2, 3, 5 and 8 only; word 3 twice in one window and in two windows.
  ids = np.array([[0, 3, 3], [2, 5, 0], [3, 8, 0]], np.int32)
  targets = np.array([4, 0, 24], np.int32)
  params = given_params(model, ids)

  def loss(params):
    logits = model.apply({"params": params}, ids, train=False)
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(3), targets])

  grad = np.asarray(jax.grad(loss)(params)["embedding"])
  np.testing.assert_allclose(grad, np_table_gradient(params, ids, targets), atol=1e-6, rtol=1e-4)
  in_batch = np.isin(np.arange(11), ids)
  assert (grad[~in_batch] == 0).all()
  assert (np.abs(grad[in_batch]).sum(axis=1) > 0).all()


def test_an_id_outside_the_table_gives_nan_never_another_row():
  model = MODELS.get("embedding_mlp_tiny")(vocab_size=5)
  ids = np.array([[0, 1, 4], [0, 5, 4], [-1, 1, 4]], np.int32)
  params = given_params(model, ids[:1])
  out = np.asarray(model.apply({"params": params}, ids, train=False))
  assert np.isfinite(out[0]).all()
  assert np.isnan(out[1]).all() and np.isnan(out[2]).all()


def test_model_without_vocabulary_or_with_vectors_is_a_clear_error():
  model = MODELS.get("embedding_mlp_twitter_pos")()
  with pytest.raises(ValueError, match=r"vocab_size=0.*gelujax.tasks.build"):
    model.init(jax.random.key(0), jnp.zeros((1, 3), jnp.int32), train=False)
  message = r"integer word ids \[batch, words\], got float32.*'embed_words'"
  with pytest.raises(ValueError, match=message):
    model.clone(vocab_size=5).init(jax.random.key(0), jnp.zeros((1, 150)), train=False)


# ------------------------------------------------------------------ the vocabulary from data

TWEETS = {
  "oct27.train": "lol\t!\nthe\tD\ncat\tN\n\nthe\tD\nthe\tD\n",
  "oct27.dev": "cat\tN\nzzz\tN\n",
  "oct27.test": "lol\t!\ndog\tN\n",
}
# The train words lol, the, cat, plus </s> and UUUNKKK.
VOCAB_SIZE = 5


def write_tweets(folder, tweets=TWEETS):
  for name, text in tweets.items():
    (folder / name).write_text(text, encoding="utf-8")


def test_build_sets_the_vocabulary_size_from_the_train_words(tmp_path):
  write_tweets(tmp_path)
  spec = tasks.get(TRAINABLE)
  splits = spec.load_data(str(tmp_path))
  assert splits["train"]["inputs"].dtype == np.int32  # the ids, not embedded on the host
  model = tasks.build(spec, splits).model
  assert model.vocab_size == VOCAB_SIZE
  # Unknown words (zzz, dog) map to UUUNKKK, inside the table.
  assert splits["validation"]["inputs"].max() < VOCAB_SIZE
  # Given by hand, the same size is accepted; the frozen default has nothing to set.
  given = spec.replace(model_options={"vocab_size": VOCAB_SIZE})
  assert tasks.build(given, splits).model.vocab_size == VOCAB_SIZE
  frozen = tasks.get("twitter_pos")
  assert not hasattr(tasks.build(frozen, frozen.load_data(str(tmp_path))).model, "vocab_size")


def test_build_refuses_mismatched_settings(tmp_path):
  write_tweets(tmp_path)
  splits = tasks.get(TRAINABLE).load_data(str(tmp_path))
  embedded = tasks.get("twitter_pos(model='embedding_mlp_twitter_pos')")
  with pytest.raises(ValueError, match=r"embeds word ids itself.*preprocessing=\(\)"):
    tasks.build(embedded, embedded.load_data(str(tmp_path)))
  with pytest.raises(ValueError, match=r"'mlp_twitter_pos' takes vectors, but the inputs are word"):
    tasks.build(tasks.get("twitter_pos(preprocessing=())"), splits)
  with pytest.raises(ValueError, match=r"vocab_size=9 differs from the data's vocabulary of 5"):
    tasks.build(tasks.get(TRAINABLE).replace(model_options={"vocab_size": 9}), splits)
  splits["test"]["inputs"][0, 1] = VOCAB_SIZE
  with pytest.raises(ValueError, match=r"split 'test' holds word id 5, outside the vocabulary"):
    tasks.build(tasks.get(TRAINABLE), splits)


def test_build_refuses_a_pretrained_file_it_would_ignore(tmp_path):
  write_tweets(tmp_path)
  words = ["</s>", "UUUNKKK", "lol", "the", "cat"]
  vectors = tmp_path / "vectors.txt"
  vectors.write_text("".join(f"{w} {' '.join(['0.5'] * 50)}\n" for w in words), encoding="utf-8")
  spec = tasks.get(TRAINABLE).replace(data_options={"embeddings": str(vectors)})
  with pytest.raises(ValueError, match=r"vectors\.txt' would be ignored"):
    tasks.build(spec, spec.load_data(str(tmp_path)))


# ------------------------------------------------------------- through experiments/train.py


def write_learnable_ark(path, num_tokens, rng):
  """Tweets of 1-7 of the words w0..w19, each word always with the same tag of nine."""
  tags, lines, left = "NOV^AD!,P", [], num_tokens
  while left:
    n = min(left, int(rng.integers(1, 8)))
    words = rng.integers(0, 20, n)
    lines += [f"w{w}\t{tags[w % len(tags)]}" for w in words]
    lines.append("")
    left -= n
  path.write_text("\n".join(lines), encoding="utf-8")


def train_one_epoch(tmp_path, task, *flags):
  """experiments/train.py of ``task`` (and ``flags``) for one epoch of one seed on learnable ARK
  files written here; the data folder and the workdir."""
  data_dir, workdir = tmp_path / "data", tmp_path / "run"
  data_dir.mkdir()
  rng = np.random.default_rng(7)
  for name, tokens in (("oct27.train", 480), ("oct27.dev", 64), ("oct27.test", 64)):
    write_learnable_ark(data_dir / name, tokens, rng)
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  given = {flag.split("=")[0] for flag in flags}  # a flag given here replaces the default
  defaults = [f for f in ("--epochs=1", "--seeds=1", "--learning_rates=1e-2") if f.split("=")[0]
              not in given]  # fmt: skip
  command = [
    sys.executable, os.path.join(ROOT, "experiments", "train.py"), f"--task={task}",
    f"--data_dir={data_dir}", f"--workdir={workdir}", *defaults, "--compilation_cache=none",
    *flags,
  ]  # fmt: skip
  result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  return data_dir, workdir


@pytest.mark.slow
def test_train_py_trains_the_embeddings_one_epoch(tmp_path):
  data_dir, workdir = train_one_epoch(tmp_path, TRAINABLE)
  train_words = {
    line.split("\t")[0] for line in (data_dir / "oct27.train").read_text().splitlines() if line
  }

  # config.json holds the task as given: the vocabulary size is the data's, not a setting.
  config = json.loads((workdir / "config.json").read_text())
  assert config["spec"]["model"] == "embedding_mlp_twitter_pos"
  assert config["spec"]["model_options"] == {} and config["spec"]["preprocessing"] == []
  (line,) = (workdir / "metrics.jsonl").read_text().splitlines()
  assert all(math.isfinite(v) for k, v in json.loads(line).items() if k.endswith("_loss"))

  spec = tasks.read_task(str(workdir))
  splits = spec.load_data(str(data_dir))
  parts = tasks.build(spec, splits)
  members, state = engine.restore(parts, str(workdir))
  vocab_size = len(train_words) + 2  # </s> and UUUNKKK
  assert parts.model.vocab_size == vocab_size
  table = np.asarray(state.params["embedding"][0])
  assert table.shape == (vocab_size, 50)
  program = engine.make_program(parts, engine.make_mesh(1), 1)
  initial = program.init(*program.put_members(members))
  before = np.asarray(initial.params["embedding"][0])
  # Every train word's vector moved; UUUNKKK (id 1) never occurs in train, so Adam left it.
  in_train = np.isin(np.arange(vocab_size), splits["train"]["inputs"])
  assert not in_train[1] and in_train.sum() == vocab_size - 1
  assert (np.abs(table - before)[in_train].max(axis=1) > 1e-3).all()
  np.testing.assert_array_equal(table[1], before[1])
  # And it learned: the train loss is lower than at initialisation.
  loss_before = engine.evaluate_members(parts, initial, splits["train"])["loss"]
  loss_after = engine.evaluate_members(parts, state, splits["train"])["loss"]
  assert loss_after[0] < 0.5 * loss_before[0]
