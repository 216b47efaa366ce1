"""The flag handling shared by the scripts in experiments/ (imported as ``_flags``: a script's
own folder is first on its path, and pytest puts experiments/ there too).

The scripts own their absl flags; these functions apply them to a task's spec
(:func:`make_spec`, the one way both scripts override a task's fields) and turn the raw values
of ``flags.DEFINE_list`` into the values ``gelujax`` takes, with one-line errors that name the
flag; `exit_stopped` is how both end when their run is stopped. Nothing in ``gelujax`` parses a
flag, nor names one: its messages name the argument or field in backticks (`` `workdir` ``),
and `name_flags` turns those into the script's flags (``--workdir``) where a script prints them.
"""

from __future__ import annotations

import atexit
import gc
import os
import re
import signal
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from absl import flags

from gelujax import host, tasks
from gelujax.registry import parse_name, sentences
from gelujax.tasks import SpecError, TaskSpec

# At exit, Python's last garbage collections walk every object a script made, JAX's, Flax's and
# the traced programs' included: a third of a second of a one-epoch train.py run on 2 CPU cores
# (benchmarks/startup.py). Frozen, they are skipped; the process ends after its files are closed.
atexit.register(gc.freeze)


def name_flags(message: str, names: Iterable[str]) -> str:
  """A library's ``message`` in a script's words: each backticked word that is one of the
  script's flags ``names`` (absl's ``flags.FLAGS`` iterates over them) becomes that flag,
  `` `workdir` `` -> ``--workdir``; everything else is left as it is (a backticked field the
  script has no flag for, a command to run)."""
  known = set(names)
  return re.sub(r"`(\w+)`", lambda m: f"--{m[1]}" if m[1] in known else m[0], message)


def make_spec(task: str | None, **flag_values: Any) -> tuple[TaskSpec, TaskSpec]:
  """``(paper, ours)``: the registered task, and the task with the flags' overrides.

  ``task`` is a registered name, optionally with field overrides (``"mnist(epochs=2)"``); each
  keyword is a flag that sets the ``TaskSpec`` field of its name (``activation``, ``dataset``,
  ``epochs``, ``batch_size``, ``dropout``), or ``embeddings``, twitter_pos's pretrained vectors
  file (a ``data_options`` entry). None leaves a field as the task has it. ``paper`` is the
  task as registered (the paper's settings), for listing how ``ours`` deviates from it.

  Raises:
    ValueError: naming the flag, for an unknown task or a value the field cannot take.
  """
  base = parse_name(task)[0] if task else None
  if base not in tasks.task_names():
    raise ValueError(
      sentences(
        f"--task {task!r} is unknown.",
        tasks.TASKS.hint(base) if base else "",
        f"Known tasks: {', '.join(tasks.task_names())}.",
      )
    )
  try:
    spec = tasks.get(task)
  except SpecError as e:  # A field override in the task's name: "mnist(optimizer='adm')".
    problem = f"--task {task!r} sets field {e.field!r} to {e.value!r}: expected {e.expected}."
    raise ValueError(sentences(problem, e.hint)) from None
  except ValueError as e:
    raise ValueError(f"--task {task!r}: {e}") from None
  overrides = {field: (field, value) for field, value in flag_values.items()}
  embeddings = flag_values.get("embeddings")
  if "embeddings" in overrides:
    if embeddings is not None and base != "twitter_pos":
      raise ValueError(f"--embeddings {embeddings} is for --task twitter_pos only, not {task}.")
    options = None if embeddings is None else {**spec.data_options, "embeddings": embeddings}
    overrides["data_options"] = ("embeddings", options)
    del overrides["embeddings"]
  return tasks.get(base), replace_spec(spec, overrides)


def replace_spec(spec: TaskSpec, flag_values: Mapping[str, tuple[str, Any]]) -> TaskSpec:
  """``spec.replace`` with ``{field: (flag, value)}``, skipping unset (None) values.

  ``TaskSpec`` checks every value; a bad one is reported under its flag's name:
  ``--dropout 1.5 is not valid for task 'mnist': expected a drop rate in [0, 1) ...``.
  """
  overrides = {field: value for field, (_, value) in flag_values.items() if value is not None}
  try:
    return spec.replace(**overrides)
  except SpecError as e:
    if e.field not in flag_values:
      raise
    flag = flag_values[e.field][0]
    problem = f"--{flag} {e.value!r} is not valid for task {spec.name!r}: expected {e.expected}."
    raise ValueError(sentences(problem, e.hint)) from None


def parse_seeds(
  values: Sequence[str] | None,
  default: int | Sequence[int],
  flag: str = "seeds",
  start: int = 0,
) -> list[int]:
  """``--seeds`` (or ``--<flag>``): one integer is a count of seeds from ``start`` (``5`` ->
  0..4); several (or one followed by a comma, ``7,``) are the seeds themselves; unset gives
  ``default`` (a count, or the seeds)."""
  if not values:
    return list(range(default)) if isinstance(default, int) else list(default)
  text = ",".join(values)
  try:
    seeds = [int(v) for v in values if v.strip()]
  except ValueError:
    seeds = []
  if not seeds:
    raise ValueError(f"--{flag} {text!r} is not a count or a comma list of integer seeds.")
  if len(values) > 1:
    return seeds
  if seeds[0] < 1:
    raise ValueError(f"--{flag} {text!r} is a count of seeds; it must be at least 1.")
  host.check_member_count(seeds[0], flag)  # Before the list is made: 99999999999999 fails here.
  return list(range(start, start + seeds[0]))


def parse_floats(flag: str, values: Sequence[str] | None, default: Sequence[float]) -> list[float]:
  """A list flag of numbers (``--learning_rates=1e-3,1e-4``); unset gives ``default``."""
  if not values:
    return [float(v) for v in default]
  try:
    return [float(v) for v in values]
  except ValueError:
    raise ValueError(
      f"--{flag} {','.join(values)!r} is not a list of numbers; pass e.g. 1e-3,1e-4."
    ) from None


def check_utf8(**flag_values: str | Sequence[str] | None) -> None:
  """Refuses flag values that are not UTF-8 text (Python hands the undecodable bytes of a
  command line over as lone surrogates, which no later step can encode)."""
  for flag, value in flag_values.items():
    for text in [value] if isinstance(value, str) else value or ():
      try:
        text.encode()
      except UnicodeEncodeError as e:
        raise ValueError(
          f"--{flag} {os.fsencode(text)!r} is not UTF-8 (byte "
          f"0x{os.fsencode(text[e.start])[0]:02x} at position {e.start}); flag values must be "
          "UTF-8 text."
        ) from None


def describe_interrupt(error: KeyboardInterrupt) -> tuple[str, int]:
  """``(what happened, exit status)`` of a run stopped by Ctrl-C or ``kill``: e.g. ``"interrupted
  by SIGTERM during the save of ..."`` (`gelujax.host.Interrupted`'s words) and 143, or
  ``"interrupted by SIGINT"`` and 130 for Python's own KeyboardInterrupt."""
  signum = getattr(error, "signum", signal.SIGINT)
  return str(error) or f"interrupted by {signal.Signals(signum).name}", 128 + signum


def exit_stopped(
  script: str, error: BaseException, refused: tuple[type[BaseException], ...] = (ValueError,)
) -> NoReturn:
  """Ends ``script`` with one line on stderr for what stopped its run: Ctrl-C or ``kill``
  (`describe_interrupt`; exit 128 + the signal's number; no checkpoint is left half-written), a
  failure of programs loaded from the compilation cache (`gelujax.host.cache_failure`; exit 1),
  or a value the library refused (an error of a ``refused`` type; exit 1). Any other error is
  raised again, with its traceback: it is a bug."""
  if isinstance(error, KeyboardInterrupt):
    what, status = describe_interrupt(error)
    print(f"{script}: {what}; re-run the same command to resume.", file=sys.stderr)
    sys.exit(status)
  line = host.cache_failure(error)
  if line is None and isinstance(error, refused):
    line = str(error)
  if line is None:
    raise error
  sys.exit(f"{script}: error: {name_flags(' '.join(line.split()), flags.FLAGS)}")
