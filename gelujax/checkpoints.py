"""Orbax checkpoints of a run's stacked member state, one per saved epoch, each verified.

Orbax writes each checkpoint into a temporary directory and renames it when complete, so a
run killed mid-save leaves no checkpoint that looks finished (the next save of the run removes
the temporary directory). Beside the state, every checkpoint holds a record
(the ``gelujax`` item): the run's config, its identity (a hash of the config without the
fields a resume may change), a checksum of every saved array, computed before the save, and
the run's metrics.jsonl records up to the checkpoint's epoch with their checksum, from which a
resume rewrites whatever metrics.jsonl lost (`gelujax.workdir.resume_metrics`).

A restore takes the newest checkpoint that belongs to the run, reads back and matches its
checksums. One that fails (unreadable, bytes changed on disk, another run's) is moved aside
to ``workdir/damaged/`` (never deleted) and the one before it is used, with one warning line.
When no checkpoint of the run can be used, the restore refuses in one line
(`CheckpointError`) rather than restart from epoch 0 over the run's results.

A SIGINT or SIGTERM that arrives during a save is held until the save is complete, then
raised as `gelujax.host.Interrupted`; a full disk is one `gelujax.workdir.WorkdirError` line.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from gelujax import host
from gelujax import workdir as workdirs

# 1: config, identity and checksums; 2: also the metrics records up to the checkpoint's epoch.
_FORMAT = 2


class CheckpointError(ValueError):
  """No checkpoint of the run can be used; the message says why."""


class Restored(NamedTuple):
  """A restored checkpoint.

  Attributes:
    epoch: the epoch it was saved after.
    state: the saved state.
    metrics: the run's metrics.jsonl records up to ``epoch``, as saved with it; None for a
      checkpoint written before checkpoints carried them.
  """

  epoch: int
  state: Any
  metrics: list[dict[str, Any]] | None


def _host_copy(x: Any) -> np.ndarray:
  """An array's whole value on this host."""
  if not isinstance(x, jax.Array) or x.is_fully_addressable:
    return np.asarray(x)
  if x.sharding.is_fully_replicated:
    return np.asarray(x.addressable_data(0))
  from jax.experimental import multihost_utils

  return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def metrics_checksum(records: Sequence[dict[str, Any]]) -> str:
  """A hash of metrics records as metrics.jsonl holds them."""
  text = workdirs.metrics_lines(records)
  return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def checksums(state: Any) -> dict[str, str]:
  """Each leaf's path -> a hash of its dtype, shape and bytes."""
  sums = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
    array = np.ascontiguousarray(_host_copy(leaf))
    digest = hashlib.blake2b(f"{array.dtype}{array.shape}".encode(), digest_size=16)
    digest.update(array.view(np.uint8).reshape(-1).data)
    sums[jax.tree_util.keystr(path)] = digest.hexdigest()
  return sums


class _OrbaxFilter(logging.Filter):
  """Drops the warnings and errors Orbax logs, from whichever thread and whenever: gelujax turns
  every failure of a save or a restore into one line of its own (`CheckpointError`,
  `gelujax.workdir.WorkdirError`, the warning of a checkpoint moved aside), and Orbax's own lines
  (a background thread's traceback on a full disk, a missing metadata file) would follow it in
  an order that depends on the threads. Its informational lines are left to the verbosity."""

  def filter(self, record: logging.LogRecord) -> bool:
    orbax = f"{os.sep}orbax{os.sep}" in record.pathname
    return not (orbax and logging.WARNING <= record.levelno < logging.CRITICAL)


_ORBAX_FILTER = _OrbaxFilter()


def _filter_orbax_logs() -> None:
  """Installs `_OrbaxFilter` on absl's logger (which Orbax logs to), once a process."""
  absl_logger = logging.getLogger("absl")
  if _ORBAX_FILTER not in absl_logger.filters:
    absl_logger.addFilter(_ORBAX_FILTER)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
  """Keeps what a failing Orbax/TensorStore read leaves behind off the terminal: its log lines
  (which dump whole TensorStore specs) and the "Exception ignored in coroutine" reports of its
  event loop; the caller reports the failure in one line instead."""
  absl_logger = logging.getLogger("absl")
  level = absl_logger.level
  absl_logger.setLevel(logging.CRITICAL)
  hooks = sys.unraisablehook, threading.excepthook
  sys.unraisablehook = threading.excepthook = lambda report: None
  try:
    yield
  except BaseException:
    # A failed read or write abandons coroutines: collected while their reports are still
    # swallowed. Only then: a full collection cost 0.17 s in a test worker holding its programs.
    gc.collect()
    raise
  finally:
    sys.unraisablehook, threading.excepthook = hooks
    absl_logger.setLevel(level)


def _first_line(error: BaseException, limit: int = 120) -> str:
  text = str(error).strip().splitlines()[0] if str(error).strip() else ""
  text = text if len(text) <= limit else text[:limit] + "..."
  return f"{type(error).__name__}: {text}" if text else type(error).__name__


class Checkpointer:
  """Saves and restores the state of a run under ``workdir/checkpoints/<epoch>``.

  Args:
    workdir: the run's directory.
    keep: how many of the newest checkpoints to keep (at least 2, so that a damaged newest
      one still leaves one to resume from).
    config: the run's config.json object; saved in every checkpoint, and a checkpoint of
      another run (another identity) is never restored. None (reading a run whose config is
      not known): any identity is accepted.
  """

  def __init__(self, workdir: str, keep: int = 2, config: dict[str, Any] | None = None):
    if keep < 2:
      raise ValueError(
        f"keep_checkpoints must be at least 2 so that a damaged newest "
        f"checkpoint leaves one to resume from; got {keep}."
      )
    _filter_orbax_logs()
    self._workdir = workdir
    self._config = config
    self._identity = None if config is None else workdirs.identity(config)
    self.directory = os.path.abspath(os.path.join(workdir, workdirs.CHECKPOINT_DIR))
    with workdirs.disk_errors(workdir, what=self.directory):
      self._manager = ocp.CheckpointManager(
        self.directory,
        item_names=("default", workdirs.RECORD_ITEM),
        options=ocp.CheckpointManagerOptions(
          max_to_keep=keep,
          enable_async_checkpointing=False,
          create=True,
        ),
      )

  def save(self, epoch: int, state: Any, metrics: Sequence[dict[str, Any]]) -> None:
    """Writes ``state`` as the checkpoint of ``epoch`` (blocks until it is complete).

    ``metrics`` are the run's metrics.jsonl records up to ``epoch``, every one of them: a
    resume from this checkpoint rewrites metrics.jsonl up to ``epoch`` from them.

    A SIGINT or SIGTERM during the save is raised as `gelujax.host.Interrupted` once it is
    complete. A full or read-only disk raises `gelujax.workdir.WorkdirError` (the unfinished
    checkpoint is never taken for one).
    """
    if self._config is None:
      raise ValueError("A Checkpointer made without the run's config cannot save.")
    record = {
      "format": _FORMAT,
      "identity": self._identity,
      "epoch": int(epoch),
      "config": self._config,
      "checksums": checksums(state),
      "metrics": list(metrics),
      "metrics_checksum": metrics_checksum(metrics),
    }
    what = f"the checkpoint of epoch {epoch}"
    with host.signals_deferred(f"the save of {what}"):
      with workdirs.disk_errors(self._workdir, what=f"{what} in {self.directory}"):
        self._remove_unfinished()
        with _quiet():
          self._manager.save(
            epoch,
            args=ocp.args.Composite(
              default=ocp.args.StandardSave(state),
              **{workdirs.RECORD_ITEM: ocp.args.JsonSave(record)},
            ),
            force=True,
          )
          self._manager.wait_until_finished()

  def _remove_unfinished(self) -> None:
    """Removes what saves of killed runs left: Orbax's temporary folders, never renamed into
    checkpoints (the writer holds the workdir's lock, so none is being written now)."""
    if jax.process_index() != 0:
      return
    for name in os.listdir(self.directory):
      if ".orbax-checkpoint-tmp" in name:
        shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

  def epochs(self) -> list[int]:
    """The epochs of the finished checkpoints, oldest first."""
    return workdirs.checkpoint_epochs(self._workdir)

  def read_record(self, epoch: int) -> dict[str, Any] | None:
    """The checkpoint's record (config, identity, checksums); None for a checkpoint written
    before gelujax recorded them. Raises `CheckpointError` if the record is unreadable."""
    item = os.path.join(self.directory, str(epoch), workdirs.RECORD_ITEM)
    path = os.path.join(item, workdirs.RECORD_FILE)
    if not os.path.exists(item):
      return None
    try:
      with open(path) as f:
        record = json.load(f)
      if not isinstance(record, dict) or not {"identity", "config", "checksums"} <= set(record):
        raise ValueError("not a gelujax checkpoint record")
    except (OSError, ValueError, UnicodeDecodeError) as e:
      raise CheckpointError(f"its record {path} is unreadable ({_first_line(e)})") from None
    return record

  def _restore_one(self, epoch: int, abstract_state: Any) -> tuple[Restored, bool]:
    """``(restored, verified)`` of one checkpoint; raises CheckpointError saying what is wrong."""
    record = self.read_record(epoch)
    if record is not None and record.get("epoch", epoch) != epoch:
      raise CheckpointError(f"it holds the checkpoint of epoch {record['epoch']}, not of {epoch}")
    if record is not None and self._identity is not None:
      if record["identity"] != self._identity:
        raise CheckpointError(
          f"it belongs to another run (identity {record['identity']}, this run's is "
          f"{self._identity})"
        )
    try:
      with _quiet():
        state = self._manager.restore(
          epoch, args=ocp.args.Composite(default=ocp.args.StandardRestore(abstract_state))
        )["default"]
        jax.block_until_ready(state)
    except Exception as e:  # Any failure to read means: this checkpoint cannot be used.
      raise CheckpointError(f"it cannot be read ({_first_line(e)})") from None
    if record is None:
      return Restored(epoch, state, None), False
    metrics = record.get("metrics")
    if metrics is not None and metrics_checksum(metrics) != record.get("metrics_checksum"):
      raise CheckpointError("its metrics records do not match the checksum written with them")
    found = checksums(state)
    wrong = [path for path, digest in record["checksums"].items() if found.get(path) != digest]
    if wrong or set(found) != set(record["checksums"]):
      where = wrong[0] if wrong else "its array names"
      raise CheckpointError(
        f"its arrays do not match the checksums written when it was saved ({where}"
        f"{f' and {len(wrong) - 1} more' if len(wrong) > 1 else ''})"
      )
    return Restored(epoch, state, metrics), True

  def _move_aside(self, epoch: int) -> str:
    """Moves a checkpoint that cannot be used to ``workdir/damaged/`` (kept, never deleted),
    so that its epoch can be saved again."""
    target_dir = os.path.join(self._workdir, workdirs.DAMAGED_DIR)
    os.makedirs(target_dir, exist_ok=True)
    target = os.path.join(target_dir, f"checkpoint-{epoch}")
    n = 1
    while os.path.exists(target):
      n += 1
      target = os.path.join(target_dir, f"checkpoint-{epoch}.{n}")
    shutil.move(os.path.join(self.directory, str(epoch)), target)
    with _quiet():
      self._manager.reload()
    return target

  def restore_latest(self, abstract_state: Any) -> Restored | None:
    """The newest usable checkpoint, or None when there is none.

    Newer checkpoints that cannot be used are moved to ``workdir/damaged/`` with one warning
    line.

    Args:
      abstract_state: a pytree of `jax.ShapeDtypeStruct` with shardings, the shape of the
        state to restore; a checkpoint of another shape cannot be used.

    Raises:
      CheckpointError: there are checkpoints but none can be used (they are left in place).
    """
    problems: list[tuple[int, str]] = []
    for epoch in reversed(self.epochs()):
      try:
        restored, verified = self._restore_one(epoch, abstract_state)
      except CheckpointError as e:
        problems.append((epoch, str(e)))
        continue
      if problems:
        moved = [self._move_aside(e) for e, _ in problems] if jax.process_index() == 0 else []
        logging.warning(
          "Skipping checkpoint%s of epoch %s in %s: %s; moved to %s. Resuming from the "
          "checkpoint of epoch %d.",
          "s" if len(problems) > 1 else "",
          ", ".join(str(e) for e, _ in problems),
          self.directory,
          "; ".join(why for _, why in problems),
          ", ".join(moved),
          epoch,
        )
      if not verified:
        logging.warning(
          "Checkpoint of epoch %d in %s has no checksums (written by an older gelujax); "
          "restored unverified.",
          epoch,
          self.directory,
        )
      return restored
    if problems:
      raise CheckpointError(
        f"No checkpoint in {self.directory} can be used: "
        + "; ".join(f"epoch {e}: {why}" for e, why in problems)
        + ". They are left as they are, and so are the run's other files. Resuming would mean "
        "training again from epoch 0 over the run's results, which gelujax never does by "
        "itself: to train this grid again, pass another `workdir`."
      )
    return None

  def close(self) -> None:
    self._manager.close()
