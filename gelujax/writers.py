"""What a run writes as it trains: metrics.jsonl records and TensorBoard event files (each
evaluation's metrics, the training loss every few steps, the member's hyperparameters), and the
progress bar (its summary.json is `gelujax.workdir.summarize` of its records).

Every file here is written by process 0 only, under the names of `gelujax.workdir` (which also
reads them back). The formats are documented in the docs' workdir page (docs/workdir.md in the
source) and must stay as they are: `gelujax.study` rebuilds tables and figures from these files
alone.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import struct
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tqdm

from gelujax import workdir as workdirs

# The TensorBoard tag of the training loss of single steps (`MetricsWriter.write_step_losses`),
# beside the evaluations' ``train_loss``, the mean over the steps since the last evaluation.
STEP_LOSS_TAG = "train_loss_step"
# About this many steps an epoch get their training loss in TensorBoard (`step_loss_interval`).
STEP_LOSSES_PER_EPOCH = 100


def step_loss_interval(steps_per_epoch: int) -> int:
  """Every how many steps TensorBoard gets a step's training loss: every step of a short epoch,
  about `STEP_LOSSES_PER_EPOCH` points of a long one."""
  return max(1, math.ceil(steps_per_epoch / STEP_LOSSES_PER_EPOCH))


class MetricsWriter:
  """Appends evaluation records to metrics.jsonl and one TensorBoard run per member.

  Args:
    workdir: the run's directory.
    members: ``[{"seed", "learning_rate"}]`` in member order.
    purge_step: the first global step to (re)write; TensorBoard drops older events of a
      killed run from this step on, so a resumed run shows no duplicated curve.
    hparams: the run's hyperparameters (names -> strings, numbers or booleans), given to
      TensorBoard's hparams plugin with each member's ``learning_rate`` and ``seed``.
    step_loss_every: `write_step_losses` writes the loss of every this many steps.
  """

  def __init__(
    self,
    workdir: str,
    members: Sequence[dict[str, Any]],
    purge_step: int,
    hparams: Mapping[str, str | float | bool] | None = None,
    step_loss_every: int = 1,
  ):
    self._file = open(os.path.join(workdir, workdirs.METRICS_FILE), "a")
    self._boards_dir = os.path.join(workdir, workdirs.TENSORBOARD_DIR)
    self._boards: list[EventFile] = []
    self._step_loss_every = step_loss_every
    try:
      with _naming(self._boards_dir):
        for m in members:
          logdir = os.path.join(self._boards_dir, f"lr={m['learning_rate']:g},seed={m['seed']}")
          board = EventFile(logdir, purge_step=purge_step or None)
          self._boards.append(board)
          with _naming(board.path):
            board.add_hparams(
              {**(hparams or {}), "learning_rate": m["learning_rate"], "seed": m["seed"]}
            )
    except OSError:
      self.close()
      raise

  def write_step_losses(self, first_step: int, losses_MxS: np.ndarray) -> None:
    """Each member's training loss at the steps of a segment that starts after global step
    ``first_step``, to TensorBoard (tag `STEP_LOSS_TAG`): the loss of step ``first_step + s``
    at TensorBoard step ``first_step + s + 1`` (the steps done, as the records count them),
    for every ``step_loss_every``-th of those steps; a non-finite loss is left out, as the
    records leave it out. Written out at the next `write`."""
    for board, losses_S in zip(self._boards, np.asarray(losses_MxS), strict=False):
      with _naming(board.path):
        for s, loss in enumerate(losses_S.tolist()):
          done = first_step + s + 1
          if done % self._step_loss_every == 0 and math.isfinite(loss):
            board.add_scalar(STEP_LOSS_TAG, loss, done)

  def write(self, records: Sequence[dict[str, Any]]) -> None:
    """Writes one record per member (the dicts of `make_records`)."""
    with _naming(self._file.name):
      self._file.write(workdirs.metrics_lines(records))
      self._file.flush()
    for record in records:
      board = self._boards[record["member"]]
      with _naming(board.path):
        for key, value in record.items():
          if key not in workdirs.RECORD_KEYS and value is not None:
            board.add_scalar(key, value, record["step"])
    for board in self._boards:
      with _naming(board.path):
        board.flush()

  def close(self) -> None:
    """Closes every file; the first write that fails (a full disk) is raised after all are
    closed."""
    errors = []
    for file, path in [(self._file, self._file.name)] + [(b, b.path) for b in self._boards]:
      try:
        with _naming(path):
          file.close()
      except OSError as e:
        errors.append(e)
    if errors:
      raise errors[0]


class EventFile:
  """A TensorBoard event file of scalars, as TensorBoard reads it.

  The file is a TFRecord stream (each record: its length, the length's masked CRC-32C, the
  bytes, their masked CRC-32C) of ``tensorflow.Event`` protocol buffers, encoded here by hand:
  a run needs only scalars, and the usual writers import PyTorch or TensorFlow when present,
  which delays a run's first step by seconds.

  Args:
    logdir: the run's folder, created if needed; each `EventFile` adds a file of its own.
    purge_step: when set, TensorBoard hides the events of earlier files of ``logdir`` from this
      step on (a resumed run rewrites them).
  """

  def __init__(self, logdir: str, purge_step: int | None = None):
    os.makedirs(logdir, exist_ok=True)
    name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}"
    self.path = os.path.join(logdir, name)
    self._file = open(self.path, "ab")
    self._write(_event(file_version="brain.Event:2"))
    if purge_step is not None:
      self._write(_event(step=purge_step, file_version="brain.Event:2"))
      self._write(_event(step=purge_step, session_log_start=True))

  def add_scalar(self, tag: str, value: float, step: int) -> None:
    value_bytes = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    self._write(_event(step=step, summary=_field(1, value_bytes)))

  def add_hparams(self, hparams: Mapping[str, str | float | bool]) -> None:
    """The run's hyperparameters for TensorBoard's hparams plugin: a ``SessionStartInfo``
    (``hparams``: name -> ``google.protobuf.Value``) in ``HParamsPluginData`` (version 0,
    field 3), the plugin data of a summary tagged ``_hparams_/session_start_info`` (what
    tensorboardX's ``hparams`` writes; TensorBoard infers the experiment from the runs')."""
    entries = b"".join(
      _field(1, _field(1, name.encode()) + _field(2, _protobuf_value(value)))
      for name, value in hparams.items()
    )
    plugin_data = _field(1, b"hparams") + _field(2, _field(3, entries))
    value = _field(1, b"_hparams_/session_start_info") + _field(9, _field(1, plugin_data))
    self._write(_event(step=0, summary=_field(1, value)))

  def flush(self) -> None:
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def _write(self, data: bytes) -> None:
    length = struct.pack("<Q", len(data))
    self._file.write(length + _masked_crc(length) + data + _masked_crc(data))


def _varint(n: int) -> bytes:
  out = bytearray()
  while True:
    byte, n = n & 0x7F, n >> 7
    out.append(byte | (0x80 if n else 0))
    if not n:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protocol buffer field."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _protobuf_value(value: str | float | bool) -> bytes:
  """A ``google.protobuf.Value``: number_value (2, double), string_value (3) or bool_value (4,
  varint)."""
  if isinstance(value, bool):
    return b"\x20" + _varint(int(value))
  if isinstance(value, str):
    return _field(3, value.encode())
  return b"\x11" + struct.pack("<d", float(value))


def _event(
  *,
  step: int | None = None,
  file_version: str | None = None,
  summary: bytes | None = None,
  session_log_start: bool = False,
) -> bytes:
  """An ``Event``: wall_time (1, double), step (2, int64), file_version (3), summary (5),
  session_log (7; status START = 1)."""
  out = b"\x09" + struct.pack("<d", time.time())
  if step is not None:
    out += b"\x10" + _varint(step & (2**64 - 1))
  if file_version is not None:
    out += _field(3, file_version.encode())
  if summary is not None:
    out += _field(5, summary)
  if session_log_start:
    out += _field(7, b"\x08\x01")
  return out


def _crc32c_table() -> list[int]:
  table = []
  for i in range(256):
    crc = i
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    table.append(crc)
  return table


_CRC32C_TABLE = _crc32c_table()


def _masked_crc(data: bytes) -> bytes:
  """TFRecord's masked CRC-32C (Castagnoli) of ``data``, little-endian."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


@contextlib.contextmanager
def _naming(path: str):
  """Names ``path`` in an OSError of a write to it (Python names the file only on open)."""
  try:
    yield
  except OSError as e:
    if e.filename is None:
      e.filename = path
    raise


def make_records(
  members: Sequence[dict[str, Any]],
  epoch: float,
  step: int,
  diverged: Sequence[bool],
  metrics: dict[str, Sequence[float]],
) -> list[dict[str, Any]]:
  """One metrics.jsonl record per member from per-member metric vectors."""
  return [
    {
      "member": i,
      "seed": member["seed"],
      "learning_rate": member["learning_rate"],
      "epoch": float(epoch),
      "step": int(step),
      "diverged": bool(diverged[i]),
      **{name: workdirs.to_json_number(values[i]) for name, values in metrics.items()},
    }
    for i, member in enumerate(members)
  ]


def progress_bar(total: int, initial: int, enabled: bool, description: str = "") -> tqdm.tqdm:
  """A progress bar of training steps on stderr unless not ``enabled``, moved after each piece
  of an epoch (`gelujax.engine.fit.pieces`: at most ``PIECE_STEPS`` steps, and each evaluation
  segment), headed by ``description``: live on a terminal, drawn at every move; written to a log
  file (a background run's ``2> log``) at most once a minute, one line each."""
  interactive = sys.stderr.isatty()
  return tqdm.tqdm(
    desc=description or None,
    total=total,
    initial=initial,
    unit="step",
    disable=not enabled,
    leave=True,
    mininterval=0.0 if interactive else 60.0,
    miniters=1 if interactive else None,
    ascii=None if interactive else True,
    file=sys.stderr if interactive else _LineFile(sys.stderr),
  )


class _LineFile:
  """A stream that ends each of tqdm's refreshes with a newline, so a log file gets lines."""

  def __init__(self, stream):
    self._stream = stream

  def write(self, text: str) -> None:
    text = text.strip("\r\n")
    if text:
      self._stream.write(text + "\n")

  def flush(self) -> None:
    self._stream.flush()
