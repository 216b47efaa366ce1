"""Twitter POS by a tagger that reads the whole tweet (task ``transformer_twitter_pos``): the
tweets regrouped from ARK files written by hand, the per-token objective against float64 NumPy,
the ``TransformerTagger`` against a float64 forward pass of each tweet alone (no padding, no
mask), and a run through experiments/train.py whose per-token metrics are recomputed in NumPy
from its restored parameters."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jitted import init
from scipy import special
from test_spelling import np_spelled_embedding
from test_transformer import ref_encoder
from test_twitter_embeddings import train_one_epoch

import gelujax
from gelujax import engine, objectives, spelling, tasks
from gelujax.data.twitter import TWITTER_TAGS
from gelujax.linen import make_activation
from gelujax.models import MODELS
from gelujax.preprocessing import PREPROCESSING, group_tokens

TASK = "transformer_twitter_pos"
TINY = f"{TASK}(model='transformer_tagger_tiny')"
WINDOWS = "twitter_pos(model='spelling_mlp_twitter_pos', preprocessing=('spell_words',))"
K, F = spelling.MAX_NGRAMS, len(spelling.FLAGS)
FLAG = {name: i for i, (name, _) in enumerate(spelling.FLAGS)}

# Train: tweets of 3 and 2 tokens; validation: one of 2; test: 2 and 4, the longest tweet.
ARK = {
  "oct27.train": "lol\t!\nthe\tD\ncat\tN\n\nthe\tD\nthe\tD\n",
  "oct27.dev": "cat\tN\nzzz\tN\n",
  "oct27.test": "lol\t!\ndog\tN\n\n@bob\t@\nLOL\t!\n:)\tE\nhttp://t.co\tU\n",
}


def write_ark(folder, files=ARK):
  for name, text in files.items():
    (folder / name).write_text(text, encoding="utf-8")


def tag(name: str) -> int:
  return TWITTER_TAGS.index(name)


# ------------------------------------------------------------------------------- the tweets


def test_group_tokens_by_hand():
  tokens = np.array([[1, 10], [2, 20], [3, 30], [4, 40], [5, 50], [6, 60]])
  got = group_tokens(tokens, np.array([2, 0, 3, 1]), 3, np.array([-1, 0]))
  pad = [-1, 0]
  expected = [
    [[1, 10], [2, 20], pad],
    [pad, pad, pad],
    [[3, 30], [4, 40], [5, 50]],
    [[6, 60], pad, pad],
  ]
  np.testing.assert_array_equal(got, expected)
  with pytest.raises(ValueError, match=r"lengths summing to 5 .* for 6 tokens and rows of 3"):
    group_tokens(tokens, np.array([2, 3]), 3, -1)
  with pytest.raises(ValueError, match=r"\(the longest 4\) for 6 tokens and rows of 3; the "):
    group_tokens(tokens, np.array([2, 4]), 3, -1)


def test_tweets_by_hand_and_each_tokens_features_are_the_window_models(tmp_path):
  write_ark(tmp_path)
  splits = tasks.get(TASK).load_data(str(tmp_path))
  np.testing.assert_array_equal(splits.info["tweet_lengths"]["train"], [3, 2])
  np.testing.assert_array_equal(splits.info["tweet_lengths"]["test"], [2, 4])
  # The vocabulary: </s>, UUUNKKK, then the sorted train words cat, lol, the.
  assert splits.info["vocab"] == ["</s>", "UUUNKKK", "cat", "lol", "the"]
  pad = -1
  expected = {
    "train": ([[3, 4, 2, pad], [4, 4, pad, pad]],
              [[tag("!"), tag("D"), tag("N"), -1], [tag("D"), tag("D"), -1, -1]]),
    "validation": ([[2, 1, pad, pad]], [[tag("N"), tag("N"), -1, -1]]),
    "test": ([[3, 1, pad, pad], [1, 1, 1, 1]],
             [[tag("!"), tag("N"), -1, -1], [tag("@"), tag("!"), tag("E"), tag("U")]]),
  }  # fmt: skip
  for name, (ids, targets) in expected.items():
    inputs = splits[name]["inputs"]
    # Padded to the longest tweet of any split (the test split's 4 tokens).
    assert inputs.shape == (len(ids), 4, 1 + K + F) and inputs.dtype == np.int32
    np.testing.assert_array_equal(inputs[..., 0], ids)
    np.testing.assert_array_equal(splits[name]["targets"], targets)
    assert splits[name]["targets"].dtype == np.int32
    padding = splits[name]["targets"] < 0
    # Beyond a tweet's end: no n-grams, no flags.
    assert (inputs[padding][:, 1 : 1 + K] == -1).all() and not inputs[padding][:, 1 + K :].any()
  # Each token's spelling is the window model's of the same token (its window's centre).
  windows = tasks.get(WINDOWS).load_data(str(tmp_path))
  for name in expected:
    real = splits[name]["targets"] >= 0
    np.testing.assert_array_equal(splits[name]["inputs"][real], windows[name]["inputs"][:, 1])
    np.testing.assert_array_equal(splits[name]["targets"][real], windows[name]["targets"])
  # ... and by hand: "@bob" is an @mention, "LOL" all capitals, "cat" has "<cat>" first.
  test = splits["test"]["inputs"]
  assert test[1, 0, 1 + K + FLAG["@mention"]] == 1 and test[1, 1, 1 + K + FLAG["all capitals"]]
  assert splits["train"]["inputs"][0, 2, 1] == spelling.bucket("<cat>")


def test_the_steps_out_of_order_or_without_tweets_are_refused(tmp_path):
  write_ark(tmp_path)
  spec = tasks.get(TASK)
  message = r"^Preprocessing step 'spell_words': split 'train' holds int32 inputs of shape \[2, 4\]"
  with pytest.raises(ValueError, match=message):
    spec.replace(preprocessing=("group_tweets", "spell_words")).load_data(str(tmp_path))
  splits = tasks.get(WINDOWS).load_data(str(tmp_path))
  del splits.info["tweet_lengths"]
  with pytest.raises(ValueError, match=r"needs each split's tweet lengths"):
    PREPROCESSING.lookup("group_tweets")(splits)


def test_build_sets_the_vocabulary_and_refuses_targets_of_another_kind(tmp_path):
  write_ark(tmp_path)
  spec = tasks.get(TASK)
  splits = spec.load_data(str(tmp_path))
  # The padding's id, -1, is no word; the vocabulary is the data's.
  model = tasks.build(spec, splits).model
  assert (model.word_dropout, model.vocab_size) == (0.25, 5)
  with pytest.raises(ValueError, match=r"objective 'classification' takes one target an example"):
    tasks.build(spec.replace(objective="classification"), splits)
  windows = spec.replace(preprocessing=("spell_words",))
  with pytest.raises(ValueError, match=r"tags every token .* the 'group_tweets' step"):
    tasks.build(windows, windows.load_data(str(tmp_path)))
  splits["test"]["inputs"][1, 3, 0] = -1  # a real token's id outside the vocabulary
  with pytest.raises(ValueError, match=r"split 'test' holds word id -1, outside the vocabulary"):
    tasks.build(spec, splits)


# ----------------------------------------------------------------------------- the objective


def np_token_metrics(logits, targets, mask):
  """Per-token cross-entropy and error, float64: sums over the valid tokens and their count."""
  logits = np.float64(logits)
  valid = (targets >= 0) & (mask[:, None] > 0)
  log_probs = logits - special.logsumexp(logits, axis=-1, keepdims=True)
  picked = np.take_along_axis(log_probs, np.maximum(targets, 0)[..., None], -1)[..., 0]
  wrong = logits.argmax(-1) != targets
  return -picked[valid].sum(), wrong[valid].sum(), valid.sum()


def test_the_token_objective_means_over_tokens_leaving_padding_and_masked_examples_out():
  rng = np.random.default_rng(0)
  logits = (3 * rng.normal(size=(4, 6, 25))).astype(np.float32)
  targets = rng.integers(0, 25, (4, 6)).astype(np.int32)
  for i, length in enumerate((6, 1, 4, 3)):
    targets[i, length:] = -1
  mask = np.array([1, 1, 1, 0], np.float32)  # the last example is the engine's padding
  objective = objectives.make("token_classification")
  loss_sum, errors, tokens = np_token_metrics(logits, targets, mask)
  assert tokens == 6 + 1 + 4
  np.testing.assert_allclose(objective.loss(logits, targets, mask), loss_sum / tokens, rtol=1e-6)
  metrics = objective.metrics(logits, targets, mask)
  np.testing.assert_allclose(metrics["loss"], loss_sum, rtol=1e-6)
  assert metrics["error"] == errors
  # The split's count is its tokens with a tag, not its examples.
  assert objective.count({"targets": targets}) == 6 + 1 + 4 + 3
  assert objectives.make("classification").count({"targets": targets}) == 4
  # A mean of the examples' means would differ (a long tweet weighs as much as a short one).
  per_example = np.mean([np_token_metrics(logits[i : i + 1], targets[i : i + 1], mask[:1])[0]
                         / (targets[i] >= 0).sum() for i in range(3)])  # fmt: skip
  assert abs(per_example - loss_sum / tokens) > 0.1
  # No valid token: a loss of 0, not NaN.
  assert objective.loss(logits, np.full_like(targets, -1), mask) == 0


# --------------------------------------------------------------------------------- the model

VOCAB, BUCKETS = 40, 64


def random_tweets(rng, lengths, length):
  """Spelled tweets ``[len(lengths), length, 1 + K + F]`` of random ids, n-grams and flags, -1
  word ids beyond each tweet's end (the n-grams and flags there random too: garbage the mask
  must hide)."""
  ids = np.empty((len(lengths), length, 1 + K + F), np.int64)
  ids[..., 0] = rng.integers(2, VOCAB, ids.shape[:2])
  ngrams = rng.integers(0, BUCKETS, (*ids.shape[:2], K))
  ngrams[rng.random(ngrams.shape) < 0.4] = -1
  ids[..., 1 : 1 + K] = ngrams
  ids[..., 1 + K :] = rng.integers(0, 2, (*ids.shape[:2], F))
  for i, n in enumerate(lengths):
    ids[i, n:, 0] = -1
  return ids.astype(np.int32)


def tagger(activation="gelu", **kwargs):
  return MODELS.get("transformer_tagger_tiny")(
    activation=make_activation(activation), vocab_size=VOCAB, buckets=BUCKETS, **kwargs
  )


def shifted(params):
  """Every leaf shifted by its own constant, so that no zero bias, zero-initialised flag map or
  unit scale hides a term applied in the wrong place."""
  leaves, tree = jax.tree_util.tree_flatten(params)
  return tree.unflatten([leaf + 0.05 * (i + 1) for i, leaf in enumerate(leaves)])


def np_tagger(params, ids, activation, depth=1):
  """Each tweet's logits ``[its tokens, classes]`` in float64, computed on its own tokens alone:
  no padding and no mask, the positions 0.. of its tokens."""
  params = jax.tree.map(np.float64, params)
  out = []
  for tweet in ids:
    n = int((tweet[:, 0] >= 0).sum())
    assert (tweet[:n, 0] >= 0).all()  # the real tokens come first
    x = np_spelled_embedding(params, tweet[None, :n])
    h = x @ params["project"]["kernel"] + params["project"]["bias"] + params["position"][:, :n]
    h = ref_encoder(h, params["encoder"], None, activation, depth)
    out.append((h @ params["head"]["kernel"] + params["head"]["bias"])[0])
  return out


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["gelu", "geglu"])
def test_the_tagger_is_each_tweet_alone_in_float64(activation):
  rng = np.random.default_rng(1)
  ids = random_tweets(rng, [5, 2, 7, 1], 7)
  model = tagger(activation)
  params = shifted(init(model, ids)["params"])
  out = np.asarray(model.apply({"params": params}, ids, train=False))
  assert out.shape == (4, 7, 25)
  for i, expected in enumerate(np_tagger(params, ids, activation)):
    np.testing.assert_allclose(out[i, : len(expected)], expected, rtol=1e-4, atol=1e-4)
  # Other garbage beyond the tweets' ends changes no real token's output, bitwise.
  other = random_tweets(np.random.default_rng(9), [5, 2, 7, 1], 7)
  other[ids[..., 0] >= 0] = ids[ids[..., 0] >= 0]
  assert not np.array_equal(other, ids)
  again = np.asarray(model.apply({"params": params}, other, train=False))
  real = ids[..., 0] >= 0
  assert np.array_equal(again[real], out[real])


@pytest.mark.slow
def test_the_tagger_drops_words_in_training_only_and_keeps_the_padding():
  ids = random_tweets(np.random.default_rng(2), [4, 2], 4)
  model = tagger(word_dropout=1.0)
  params = shifted(init(model, ids)["params"])
  trained = np.asarray(
    model.apply({"params": params}, ids, train=True, rngs={"dropout": jax.random.key(0)})
  )
  unknown = ids.copy()
  unknown[..., 0] = np.where(ids[..., 0] >= 0, 1, -1)  # every word UUUNKKK, padding kept
  for i, expected in enumerate(np_tagger(params, unknown, "gelu")):
    np.testing.assert_allclose(trained[i, : len(expected)], expected, rtol=1e-4, atol=1e-4)
  evaluated = np.asarray(model.apply({"params": params}, ids, train=False))
  for i, expected in enumerate(np_tagger(params, ids, "gelu")):
    np.testing.assert_allclose(evaluated[i, : len(expected)], expected, rtol=1e-4, atol=1e-4)


def test_the_tagger_refuses_windows_and_vectors():
  model = tagger()
  message = r"ids \[tweets, tokens, 1 \+ n-grams \+ flags\].*got float32 inputs of shape \[2, 4\]"
  with pytest.raises(ValueError, match=message):
    model.init(jax.random.key(0), jnp.zeros((2, 4)), train=False)
  with pytest.raises(ValueError, match=r"TransformerTagger vocab_size=0: .*gelujax.tasks.build"):
    ids = random_tweets(np.random.default_rng(0), [1], 2)
    model.clone(vocab_size=0).init(jax.random.key(0), ids, train=False)


# ---------------------------------------------------------- through experiments/train.py


def np_split_metrics(params, split):
  """Mean cross-entropy and error per token of a split (padding left out), and the mean of
  the tweets' own means, from float64 logits of each tweet alone."""
  losses, errors, per_tweet = [], [], []
  for logits, targets in zip(np_tagger(params, split["inputs"], "geglu"), split["targets"],
                             strict=True):  # fmt: skip
    targets = targets[: len(logits)]
    assert (targets >= 0).all()
    loss = special.logsumexp(logits, axis=-1) - logits[np.arange(len(targets)), targets]
    losses += list(loss)
    errors += list(logits.argmax(-1) != targets)
    per_tweet.append(loss.mean())
  return np.mean(losses), np.mean(errors), np.mean(per_tweet)


@pytest.mark.slow
def test_train_py_reports_per_token_metrics_that_numpy_recomputes(tmp_path):
  data_dir, workdir = train_one_epoch(tmp_path, TINY, "--activation=geglu", "--epochs=2")
  config = json.loads((workdir / "config.json").read_text())
  assert config["spec"]["activation"] == "geglu"
  assert config["spec"]["objective"] == "token_classification"
  assert "vocab_size" not in config["spec"]["model_options"]  # a fact of the data
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert [r["epoch"] for r in records] == [1.0, 2.0]
  assert all(math.isfinite(v) for r in records for k, v in r.items() if k.endswith("_loss"))

  spec = tasks.read_task(str(workdir))
  splits = spec.load_data(str(data_dir))
  parts = tasks.build(spec, splits)
  _, state = engine.restore(parts, str(workdir))
  params = jax.tree.map(lambda leaf: np.asarray(leaf[0]), state.params)
  # --activation=geglu gave the encoder its gated feed-forward, at the plain one's count.
  g = gelujax.gated_hidden_features(16, 32)
  assert params["encoder"]["block_0"]["mlp"]["hidden"]["kernel"].shape == (16, 2 * g)
  for name in ("validation", "test"):
    loss, error, per_tweet = np_split_metrics(params, splits[name])
    assert abs(per_tweet - loss) > 1e-3  # a mean over tweets would be another number
    np.testing.assert_allclose(records[-1][f"{name}_loss"], loss, rtol=1e-4)
    np.testing.assert_allclose(records[-1][f"{name}_error"], error, rtol=1e-6, atol=1e-12)
    evaluated = engine.evaluate_members(parts, state, splits[name])
    np.testing.assert_allclose(evaluated["loss"], [loss], rtol=1e-4)
    np.testing.assert_allclose(evaluated["error"], [error], rtol=1e-6, atol=1e-12)
