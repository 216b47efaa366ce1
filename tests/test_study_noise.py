"""Tests for gelujax.study.noise: curves and values of noise evaluations, and their files (the
evaluation itself runs end to end in tests/test_reproduce_cli.py)."""

import json

import numpy as np
import pytest

from gelujax.paper import NOISE_LEVELS
from gelujax.study import noise


def test_noise_curve_by_hand():
  result = {
    "levels": [0.0, 1.5, 3.0],
    "accuracy": [[0.9, 0.6, 0.2], [0.95, 0.5, 0.3], [0.97, 0.7, 0.1]],
  }
  curve = noise.noise_curve(result, "accuracy")
  np.testing.assert_allclose(curve.median, [0.95, 0.6, 0.2])
  np.testing.assert_allclose(curve.low, [0.9, 0.5, 0.1])
  np.testing.assert_allclose(curve.high, [0.97, 0.7, 0.3])
  assert curve.members == 3


def test_noise_values_interpolate_each_seed():
  result = {"levels": [0.0, 2.0], "accuracy": [[0.9, 0.5], [0.8, 0.2]]}
  assert noise.noise_values(result, "accuracy", 1.0) == pytest.approx([0.7, 0.5])
  assert noise.noise_at(result, "accuracy", 1.0) == pytest.approx(0.6)


def test_a_kept_evaluation_is_read_back_and_a_missing_one_needs_a_checkpoint(tmp_path):
  workdir = tmp_path / "runs" / "gelu_eval"
  workdir.mkdir(parents=True)
  path = noise.noise_path(tmp_path / "out", workdir, 1e-3)
  assert path == tmp_path / "out" / "noise" / "gelu_eval_lr0.001.json"
  options = {"out": tmp_path / "out", "root": tmp_path, "data_dir": None}
  # Nothing kept and no checkpoint to evaluate: nothing, even when asked to evaluate.
  assert noise.cached_noise(workdir, 1e-3, **options, evaluate=True) is None
  kept = {"learning_rate": 1e-3, "levels": NOISE_LEVELS.tolist(), "seeds": [100]}
  path.parent.mkdir(parents=True)
  path.write_text(json.dumps(kept))
  assert noise.cached_noise(workdir, 1e-3, **options, evaluate=False) == kept
  # Kept at another lr: not this evaluation.
  assert noise.cached_noise(workdir, 1e-4, **options, evaluate=False) is None
