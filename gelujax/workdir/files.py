"""The names inside a run's folder, its JSON files, and the error every workdir check raises.

Every name inside a workdir is here (`CONFIG_FILE`, `METRICS_FILE`, ...), and a run folder's own
(`folder_name`), and so is reading and
writing its JSON files (`read_json`; `write_json` and `replace_atomically`: atomic), keeping a
file that is about to be rebuilt aside (`keep_aside`) and the epochs its checkpoints hold. The
other modules of `gelujax.workdir` build on this one, which imports none of them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINT_DIR = "checkpoints"
DAMAGED_DIR = "damaged"  # Checkpoints that cannot be used, moved aside (never deleted).
LOCK_FILE = "lock"
# The item beside a checkpoint's state that records the run, and the file Orbax's JSON handler
# writes inside it: ``checkpoints/<epoch>/gelujax/metadata``.
RECORD_ITEM = "gelujax"
RECORD_FILE = "metadata"


class WorkdirError(ValueError):
  """A workdir that cannot be used as asked; the message names it and what to do."""


def folder_name(name: str) -> str:
  """A run's folder name for ``name`` (made of an activation spec, a task, ...): each run of
  characters other than letters, digits, ``_``, ``.``, ``=`` and ``-`` becomes one ``_``
  (``myacts:squareplus`` -> ``myacts_squareplus``; a plain name stays as it is). The one
  rule train.py's default workdir and a study's run folders (`gelujax.study.runs.run_name`)
  follow, so both name the same activation's folder alike."""
  return re.sub(r"[^\w.=-]+", "_", name)


def checkpoint_epochs(workdir: str) -> list[int]:
  """The epochs of the finished checkpoints of ``workdir``, oldest first (Orbax's unfinished
  ones carry a suffix and are left out)."""
  directory = os.path.join(workdir, CHECKPOINT_DIR)
  if not os.path.isdir(directory):
    return []
  return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def holds_checkpoint(workdir: str, epoch: int) -> bool:
  """Whether ``checkpoints/<epoch>`` holds what a finished save leaves: its record, readable and
  naming that epoch (or, for a checkpoint written before checkpoints carried records, the state's
  Orbax metadata). A folder that merely has an epoch's name (empty, or another epoch's record)
  is no finished epoch: a restore moves it aside, and no refusal counts it."""
  folder = os.path.join(workdir, CHECKPOINT_DIR, str(epoch))
  record = os.path.join(folder, RECORD_ITEM, RECORD_FILE)
  if not os.path.lexists(os.path.join(folder, RECORD_ITEM)):
    return os.path.isfile(os.path.join(folder, "default", "_METADATA"))
  try:
    with open(record) as f:
      found = json.load(f)
  except (OSError, ValueError, UnicodeDecodeError):
    return False
  return isinstance(found, dict) and found.get("epoch", epoch) == epoch


def trained_epochs(workdir: str) -> int:
  """The newest epoch a finished checkpoint of ``workdir`` holds (`holds_checkpoint`; 0 without
  one)."""
  return max((e for e in checkpoint_epochs(workdir) if holds_checkpoint(workdir, e)), default=0)


def has_content(workdir: str, name: str) -> bool:
  path = os.path.join(workdir, name)
  return os.path.exists(path) and os.path.getsize(path) > 0


def to_json_number(value: Any) -> float | None:
  """A float for JSON, or None where it is not finite (JSON has no NaN or Infinity)."""
  value = float(value)
  return value if math.isfinite(value) else None


def jsonable(obj: Any) -> Any:
  """``obj`` with non-finite floats as None and NumPy scalars and arrays as Python values."""
  if isinstance(obj, Mapping):
    return {str(k): jsonable(v) for k, v in obj.items()}
  if isinstance(obj, list | tuple | np.ndarray):
    return [jsonable(v) for v in obj]
  if isinstance(obj, float | np.floating):
    return to_json_number(obj)
  if isinstance(obj, np.integer | np.bool_):
    return obj.item()
  return obj


def write_json(path: str | os.PathLike, obj: Any) -> None:
  """Writes ``jsonable(obj)`` atomically (readers, and a run killed at any moment, see the old
  file or the new one, never a part), creating the parent directory."""
  text = json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n"  # Fails before writing.
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  replace_atomically(path, text)


def replace_atomically(path: str | os.PathLike, text: str) -> None:
  """Writes ``text`` to a temporary file beside ``path``, then renames it over ``path``; a
  failed write (a full disk) removes the temporary file and leaves ``path`` as it was."""
  tmp = f"{path}.tmp"
  try:
    with open(tmp, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException as e:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    if isinstance(e, OSError) and e.filename is None:
      e.filename = str(path)  # Name the file in the error, not its temporary twin.
    raise


def read_json(path: str | os.PathLike) -> Any:
  """Reads one JSON file, naming the file and the line when it is malformed."""
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(
      f"{path}, line {e.lineno}: not valid JSON ({e.msg}, column {e.colno}); the file is left "
      "as it is: fix it, or put back a good copy."
    ) from None


def keep_aside(path: str) -> str:
  """Renames a file that is about to be rebuilt to ``<path>.damaged`` (``.damaged.2``, ... when
  taken: nothing is overwritten) and returns its new path."""
  target, n = f"{path}.damaged", 1
  while os.path.exists(target):
    n += 1
    target = f"{path}.damaged.{n}"
  os.replace(path, target)
  return target
