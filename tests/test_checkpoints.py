"""Tests for gelujax.checkpoints: save, restore the newest readable, skip damaged ones."""

import glob
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gelujax import checkpoints


def make_state(value: float):
  return {"w": jnp.full((3, 2), value, jnp.float32), "step": jnp.int32(value), "ok": jnp.bool_(1)}


def abstract(state):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), state)


def assert_state_equal(state, value):
  np.testing.assert_array_equal(state["w"], np.full((3, 2), value, np.float32))
  assert int(state["step"]) == int(value) and bool(state["ok"])


def test_restore_returns_none_without_checkpoints(tmp_path):
  checkpointer = checkpoints.Checkpointer(str(tmp_path))
  assert checkpointer.restore_latest(abstract(make_state(0))) is None
  checkpointer.close()


def test_saves_keep_the_newest_two_and_restore_the_newest(tmp_path):
  checkpointer = checkpoints.Checkpointer(str(tmp_path))
  for epoch in (1, 2, 3):
    checkpointer.save(epoch, make_state(epoch))
  checkpointer.close()
  assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "3"]
  epoch, state = checkpoints.Checkpointer(str(tmp_path)).restore_latest(abstract(make_state(0)))
  assert epoch == 3
  assert_state_equal(state, 3)


def test_damaged_newest_checkpoint_is_skipped_with_a_warning(tmp_path, caplog):
  checkpointer = checkpoints.Checkpointer(str(tmp_path))
  checkpointer.save(1, make_state(1))
  checkpointer.save(2, make_state(2))
  checkpointer.close()
  for path in glob.glob(str(tmp_path / "checkpoints/2/**/*"), recursive=True):
    if os.path.isfile(path) and ("/d/" in path or "ocdbt" in path):  # the array data
      with open(path, "wb") as f:
        f.write(b"garbage")
  with caplog.at_level(logging.WARNING):
    checkpointer = checkpoints.Checkpointer(str(tmp_path))
    epoch, state = checkpointer.restore_latest(abstract(make_state(0)))
  assert epoch == 1
  assert_state_equal(state, 1)
  assert "Skipping checkpoint" in caplog.text and "epoch 2" in caplog.text
  checkpointer.save(2, make_state(5))  # the damaged one is gone, so epoch 2 can be saved again
  checkpointer.close()


def test_unfinished_checkpoint_is_ignored(tmp_path, caplog):
  checkpointer = checkpoints.Checkpointer(str(tmp_path))
  checkpointer.save(1, make_state(1))
  checkpointer.close()
  # What a save killed midway leaves: a temporary directory that was never renamed.
  os.makedirs(tmp_path / "checkpoints" / "2.orbax-checkpoint-tmp-123" / "default")
  with caplog.at_level(logging.WARNING):
    restored = checkpoints.Checkpointer(str(tmp_path)).restore_latest(abstract(make_state(0)))
  epoch, state = restored
  assert epoch == 1
  assert_state_equal(state, 1)
  assert "Skipping" not in caplog.text  # never taken for a checkpoint


def test_keep_below_two_is_refused(tmp_path):
  with pytest.raises(ValueError, match="at least 2"):
    checkpoints.Checkpointer(str(tmp_path), keep=1)
