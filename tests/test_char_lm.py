"""The character-level language model: Tiny Shakespeare's reader, the CharGPT model against a
NumPy float64 forward pass, causality, nanoGPT's AdamW schedule, and `char_lm` through the
command."""

import hashlib
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special
from test_download import cache, online, publish, server  # noqa: F401  (127.0.0.1 fixtures)
from test_train_cli import run_main, script  # noqa: F401

from gelujax import data, models, optimizers
from gelujax import workdir as workdirs

# A small play, its own text: 60 distinct characters would do; this has fewer.
TEXT = (
  "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
  "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
  "resolved.\n\n"
) * 12


def write_text(folder, text=TEXT):
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, "input.txt")
  with open(path, "w") as f:
    f.write(text)
  return path


# ----------------------------------------------------------------------------- the data


def test_the_text_is_cut_by_position_and_every_later_character_is_a_target_once(tmp_path):
  """90% / 5% / 5% by position; the vocabulary is the sorted distinct characters; training
  windows start at every character, validation and test windows lie end to end, so each of
  their characters but the first is predicted once, from those before it in its window."""
  write_text(tmp_path)
  splits = data.load("tiny_shakespeare", tmp_path, block_size=8)
  vocab = sorted(set(TEXT))
  assert splits.info["vocab"] == vocab
  n = len(TEXT)
  cut = {"train": TEXT[: int(n * 0.9)], "validation": TEXT[int(n * 0.9) : int(n * 0.95)],
         "test": TEXT[int(n * 0.95) :]}  # fmt: skip
  for name, part in cut.items():
    ids = np.array([vocab.index(c) for c in part])
    inputs, targets = splits[name]["inputs"], splits[name]["targets"]
    assert inputs.dtype == np.int16 and targets.dtype == np.int8
    if name == "train":
      assert len(inputs) == len(part) - 1
      for start in (0, 5, len(part) - 9):
        np.testing.assert_array_equal(inputs[start], ids[start : start + 8])
        np.testing.assert_array_equal(targets[start], ids[start + 1 : start + 9])
    else:
      predicted = targets[targets >= 0]
      np.testing.assert_array_equal(predicted, ids[1:])
      np.testing.assert_array_equal(inputs.reshape(-1)[: len(part) - 1], ids[:-1])


def test_a_bad_text_or_option_is_refused_naming_it(tmp_path):
  write_text(tmp_path / "short", "ab")
  with pytest.raises(ValueError, match="too few to split"):
    data.load("tiny_shakespeare", tmp_path / "short")
  with pytest.raises(ValueError, match="block_size is 0; it must be an integer >= 1"):
    data.load("tiny_shakespeare", tmp_path / "short", block_size=0)
  (tmp_path / "latin1").mkdir()
  (tmp_path / "latin1" / "input.txt").write_bytes(b"caf\xe9 " * 20)
  with pytest.raises(ValueError, match="not UTF-8 text"):
    data.load("tiny_shakespeare", tmp_path / "latin1")


def test_the_text_is_downloaded_verified_and_cached(server, online, cache, monkeypatch):  # noqa: F811
  """Served from 127.0.0.1 under its own checksum: downloaded once, verified, read from the
  cache after."""
  body = TEXT.encode()
  publish(monkeypatch, server, "tiny_shakespeare", {"input.txt": body})
  splits = data.load("tiny_shakespeare", block_size=8)
  assert (cache / "tiny_shakespeare" / "input.txt").read_bytes() == body
  assert splits.info["record"]["sha256"] == {"input.txt": hashlib.sha256(body).hexdigest()}
  server.requests.clear()
  data.load("tiny_shakespeare", block_size=8)
  assert server.requests == []


def test_the_published_file_is_the_one_the_issue_names():
  (entry,) = data.published.lookup("tiny_shakespeare").files
  assert (entry.name, entry.size) == ("input.txt", 1115394)
  assert entry.sha256 == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


# ---------------------------------------------------------------------------- the model


def _layer_norm(x, p):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-6) * p["scale"] + p["bias"]


def _dense(x, p):
  return x @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


def numpy_char_gpt(params, ids, num_heads):
  """CharGPT's forward pass in NumPy float64, written from its docstring."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  table = p["embed"]["embedding"]
  x = table[ids] + p["position"][0, : ids.shape[1]]
  length = ids.shape[1]
  causal = np.tril(np.ones((length, length), bool))
  decoder = p["decoder"]
  for i in range(len([k for k in decoder if k.startswith("block_")])):
    block = decoder[f"block_{i}"]
    y = _layer_norm(x, block["attention_norm"])
    att = block["attention"]
    q, k, v = (np.einsum("bld,dhk->blhk", y, att[n]["kernel"]) + att[n]["bias"]
               for n in ("query", "key", "value"))  # fmt: skip
    scores = np.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(causal, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("bhqs,bshk->bqhk", weights, v)
    x = x + np.einsum("bqhk,hkd->bqd", heads, att["out"]["kernel"]) + att["out"]["bias"]
    y = _layer_norm(x, block["mlp_norm"])
    h = _dense(y, block["mlp"]["hidden"])
    h = h * 0.5 * (1 + special.erf(h / np.sqrt(2)))  # the exact GELU
    x = x + _dense(h, block["mlp"]["out"])
  x = _layer_norm(x, decoder["final_norm"])
  return x @ table.T  # the tied head


def tiny_model(**options):
  return models.MODELS.get("char_gpt_tiny")(vocab_size=11, activation="gelu", **options)


def test_char_gpt_matches_a_numpy_float64_forward_pass():
  model = tiny_model(depth=2)
  ids = np.random.default_rng(0).integers(0, 11, (3, 7))
  params = model.init(jax.random.key(0), ids, train=False)["params"]
  jax.config.update("jax_default_matmul_precision", "highest")
  try:
    logits = model.apply({"params": params}, ids, train=False)
  finally:
    jax.config.update("jax_default_matmul_precision", None)
  assert logits.shape == (3, 7, 11)
  expected = numpy_char_gpt(params, ids, num_heads=2)
  np.testing.assert_allclose(np.asarray(logits, np.float64), expected, rtol=2e-4, atol=2e-5)
  assert "head" not in params  # tied: the logits come from the embedding table


def test_a_later_character_never_changes_an_earlier_positions_output():
  model = tiny_model(depth=2)
  ids = np.random.default_rng(1).integers(0, 11, (2, 9))
  params = model.init(jax.random.key(1), ids, train=False)
  before = np.asarray(model.apply(params, ids, train=False))
  for t in range(9):
    changed = ids.copy()
    changed[:, t:] = (changed[:, t:] + 3) % 11
    after = np.asarray(model.apply(params, changed, train=False))
    np.testing.assert_array_equal(after[:, :t], before[:, :t])
    assert not np.allclose(after[:, t], before[:, t])


def test_a_gated_unit_keeps_the_plain_feed_forwards_parameter_count():
  ids = np.zeros((1, 4), np.int32)

  def count(activation):
    model = models.MODELS.get("char_gpt_cpu")(vocab_size=65, activation=activation)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), ids, train=False))
    return sum(np.prod(x.shape) for x in jax.tree.leaves(shapes))

  plain, gated = count("gelu"), count("geglu")
  assert abs(gated - plain) / plain < 0.01, (plain, gated)


# ----------------------------------------------------------------------------- AdamW


def test_adamw_cosine_follows_nanogpts_rate_and_decays_only_matrices():
  """The rate nanoGPT's get_lr computes (warmup of 100 steps from 0, a cosine to a tenth), the
  update of one AdamW step with decoupled weight decay 0.1 on the matrix, none on the bias."""
  total, peak = 300, 1e-3
  optimizer = optimizers.build("adamw_cosine", peak, epochs=3, steps_per_epoch=100)
  params = {"kernel": jnp.ones((2, 2)), "bias": jnp.ones(2)}
  grads = {"kernel": jnp.zeros((2, 2)), "bias": jnp.zeros(2)}
  state = optimizer.init(params)
  for step in range(total):
    updates, state = optimizer.update(grads, state, params)
    if step < 100:
      rate = peak * (step + 1) / 100
    else:
      ratio = (step - 100) / (total - 100)
      rate = 1e-4 + 0.5 * (1 + np.cos(np.pi * ratio)) * (peak - 1e-4)
    if step in (0, 50, 99, 100, 200, 299):
      np.testing.assert_allclose(updates["kernel"], -rate * 0.1 * np.ones((2, 2)), rtol=1e-5)
      np.testing.assert_array_equal(updates["bias"], np.zeros(2))
  assert not optimizers.extendable("adamw_cosine")


# ------------------------------------------------------------------------- the command


TASK = (
  "--task=char_lm(model='char_gpt_tiny', data_options={'block_size': 16}, steps_per_epoch=8, "
  "evals_per_epoch=1)"
)


@pytest.mark.e2e
def test_char_lm_trains_through_the_command_and_resumes_bitwise(script, tmp_path):  # noqa: F811
  """Two epochs of 8 steps: the validation loss starts below ln(vocabulary) and falls; the same
  run resumed from its epoch-1 checkpoint (the epoch-2 one removed, as a kill before its save
  leaves it) ends bitwise equal: windows are drawn from the seed, epoch and step."""
  write_text(tmp_path / "text")
  args = [TASK, f"--data_dir={tmp_path / 'text'}", "--epochs=2", "--seeds=1"]
  assert run_main(script, *args, f"--workdir={tmp_path / 'run'}") is None
  records = workdirs.read_metrics(str(tmp_path / "run"))
  vocab = len(set(TEXT))
  assert records[0]["validation_loss"] < np.log(vocab)
  assert records[-1]["validation_loss"] < records[0]["validation_loss"]
  shutil.copytree(tmp_path / "run", tmp_path / "again")
  shutil.rmtree(tmp_path / "again" / "checkpoints" / "2")
  assert run_main(script, *args, f"--workdir={tmp_path / 'again'}") is None
  assert workdirs.read_metrics(str(tmp_path / "again")) == records
