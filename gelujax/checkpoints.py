"""Orbax checkpoints of a run's stacked member state, one per saved epoch.

Orbax writes each checkpoint into a temporary directory and renames it when complete, so a
run killed mid-save leaves no checkpoint that looks finished. A finished checkpoint that
cannot be read back (a truncated or damaged file) is skipped with a warning and the one
before it is used.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

CHECKPOINT_DIR = "checkpoints"


class Checkpointer:
  """Saves and restores the state of a run under ``workdir/checkpoints/<epoch>``.

  Args:
    workdir: the run's directory.
    keep: how many of the newest checkpoints to keep (at least 2, so that a damaged newest
      one still leaves one to resume from).
  """

  def __init__(self, workdir: str, keep: int = 2):
    if keep < 2:
      raise ValueError(
        f"keep_checkpoints must be at least 2 so that a damaged newest "
        f"checkpoint leaves one to resume from; got {keep}."
      )
    self._manager = ocp.CheckpointManager(
      os.path.abspath(os.path.join(workdir, CHECKPOINT_DIR)),
      options=ocp.CheckpointManagerOptions(
        max_to_keep=keep, enable_async_checkpointing=False, create=True
      ),
    )

  def save(self, epoch: int, state: Any) -> None:
    """Writes ``state`` as the checkpoint of ``epoch`` (blocks until it is complete)."""
    self._manager.save(epoch, args=ocp.args.StandardSave(state), force=True)
    self._manager.wait_until_finished()

  def restore_latest(self, abstract_state: Any) -> tuple[int, Any] | None:
    """The newest readable checkpoint as ``(epoch, state)``, or None when there is none.

    Args:
      abstract_state: a pytree of `jax.ShapeDtypeStruct` with shardings, the shape of the
        state to restore; a checkpoint of another shape counts as unreadable.
    """
    for epoch in sorted(self._manager.all_steps(), reverse=True):
      try:
        state = self._manager.restore(epoch, args=ocp.args.StandardRestore(abstract_state))
        jax.block_until_ready(state)
      except Exception as e:  # Any failure to read means: try the older one.
        logging.warning(
          "Skipping checkpoint %s of epoch %d: it cannot be restored (%s: %s).",
          self._manager.directory,
          epoch,
          type(e).__name__,
          e,
        )
        # Gone, so that the resumed run can save this epoch again.
        self._manager.delete(epoch)
        continue
      return epoch, state
    return None

  def close(self) -> None:
    self._manager.close()
