"""Twitter POS by a tagger that reads the whole tweet: the per-token objective against float64
NumPy."""

import numpy as np
from scipy import special

from gelujax import objectives

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
