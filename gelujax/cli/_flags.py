"""The flag handling shared by the commands ``gelujax train`` and ``gelujax reproduce``
(:mod:`gelujax.cli.train`, :mod:`gelujax.cli.reproduce`; ``experiments/train.py`` and
``experiments/reproduce.py`` run the same two).

The commands own their absl flags; these functions apply them to a task's spec
(:func:`make_spec`, the one way both commands override a task's fields) and turn the raw values
of ``flags.DEFINE_list`` into the values ``gelujax`` takes, with one-line errors that name the
flag; :func:`run` is how both start, `begin` what both do first, and `exit_stopped` how both end
when their run is stopped. Nothing else in ``gelujax`` parses a flag, nor names one: its
messages name the argument or field in backticks (`` `workdir` ``), and `name_flags` turns those
into the command's flags (``--workdir``) where a command prints them.
"""

from __future__ import annotations

import atexit
import functools
import gc
import io
import itertools
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from absl import app, flags

import gelujax
from gelujax import host, tasks
from gelujax.registry import ParseError, parse_name, sentences
from gelujax.tasks import SpecError, TaskSpec


def run(module: ModuleType, program: str | None = None) -> NoReturn:
  """Runs the command ``module`` (its ``main``) under absl, as ``program`` names it in its help
  and errors (None: as ``sys.argv[0]`` does, the path of a script run as ``python script.py``).

  Its ``--help`` is the one its script always printed: absl shows the docstring of the
  ``__main__`` module and the flags defined there, under ``sys.argv[0]``'s name; the flags are
  defined in ``module`` (one definition for every way in: a script, ``python -m``, the console
  script), so its docstring and flags are made the main module's.
  """
  if program is not None:
    sys.argv[0] = program
  sys.modules["__main__"].__doc__ = module.__doc__
  for flag in flags.FLAGS.get_key_flags_for_module(module.__name__):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  app.run(module.main)


def begin() -> None:
  """What a command's ``main`` does first.

  A user's ``--activation=module:function`` is imported from the folder the command runs in, as
  ``python -m`` finds it: the commands put that folder first on the path, so that every way in
  (the console script, whose path starts with its own folder; ``python -m``; a script) imports
  the same module where another of its name lies elsewhere on the path (the library itself
  leaves sys.path as it found it).
  """
  if os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())
  _freeze_at_exit()
  _tolerate_lost_streams()


class _Tolerant(io.TextIOBase):
  """A text stream that drops what it can no longer write: a terminal closed, a reader gone
  (``| head -1``), a full device (``2>/dev/full``), a stream closed before the command started
  (``2>&-``). The run's records are its files, not its messages: losing the messages must not
  stop it. It remembers that it was lost and writes nothing more."""

  def __init__(self, stream: Any):
    super().__init__()
    self._stream = stream
    self.lost = stream is None

  def write(self, text: str) -> int:
    if not self.lost:
      try:
        self._stream.write(text)
      except (OSError, ValueError):  # EPIPE, ENOSPC, EBADF; ValueError: closed
        self.lost = True
    return len(text)

  def flush(self) -> None:
    if not self.lost:
      try:
        self._stream.flush()
      except (OSError, ValueError):
        self.lost = True

  def isatty(self) -> bool:
    try:
      return not self.lost and self._stream.isatty()
    except (OSError, ValueError):
      return False

  def fileno(self) -> int:
    if self.lost:
      raise OSError("the stream is lost")
    return self._stream.fileno()

  @property
  def encoding(self) -> str:
    return getattr(self._stream, "encoding", None) or "utf-8"

  def writable(self) -> bool:
    return True


def _tolerate_lost_streams() -> None:
  """Puts `_Tolerant` around ``sys.stdout`` and ``sys.stderr`` (once)."""
  for name in ("stdout", "stderr"):
    stream = getattr(sys, name)
    if not isinstance(stream, _Tolerant):
      setattr(sys, name, _Tolerant(stream))


@functools.cache
def _freeze_at_exit() -> None:
  # At exit, Python's last garbage collections walk every object a command made, JAX's, Flax's
  # and the traced programs' included: a third of a second of a one-epoch train.py run on 2 CPU
  # cores (benchmarks/startup.py). Frozen, they are skipped; the process ends after its files
  # are closed. Once a process: a test calls a command's main many times.
  atexit.register(gc.freeze)


def member_count(task: str | None, learning_rates: Any, seeds: Any) -> int:
  """The grid's size as the flags ``learning_rates`` and ``seeds`` and ``task`` (a registered
  task, possibly with overrides of those two fields) give it, read without building the task's
  spec (which checks, and so runs, a user's activation); 1 where they cannot be read (building
  the spec then refuses them, naming the flag)."""
  try:
    base, overrides = parse_name(task or "")
    registered = tasks.TASKS.lookup(base)
    rates = parse_floats(
      "learning_rates", learning_rates, overrides.get("learning_rates", registered.learning_rates)
    )
    return len(rates) * len(parse_seeds(seeds, overrides.get("seeds", registered.seeds)))
  except Exception:
    return 1


def working_folder() -> tuple[Path, bool]:
  """``(root, project)``: the folder the command runs in, under which its result goes by default
  (``results/<dataset>/<task>/``) and from which its README's commands run; and whether that is
  the root of the checkout this code runs from, whose ``results/`` and README overview are the
  project's own record. Anywhere else the result is the user's: the
  checkout, and its README, are left as they are."""
  here = Path.cwd()
  code = Path(gelujax.__file__).resolve().parent.parent
  project = (code / "experiments" / "reproduce.py").is_file() and here.resolve() == code
  return here, project


def name_flags(message: str, names: Iterable[str], words: Sequence[tuple[str, str]] = ()) -> str:
  """A library's ``message`` in a command's words: first each ``(pattern, replacement)`` of
  ``words`` (a command's own words for a field it has no flag for: ``reproduce`` puts each arm's
  `` `workdir` `` under ``--out``), then each backticked word that is one of the command's flags
  ``names`` (absl's ``flags.FLAGS`` iterates over them) becomes that flag, `` `workdir` `` ->
  ``--workdir``; everything else is left as it is (a backticked field the command has no flag
  for, a command to run)."""
  for pattern, replacement in words:
    message = re.sub(pattern, replacement, message)
  known = set(names)
  return re.sub(r"`(\w+)`", lambda m: f"--{m[1]}" if m[1] in known else m[0], message)


def make_spec(
  task: str | None, set_elsewhere: Mapping[str, tuple[str, Any]] | None = None, **flag_values: Any
) -> tuple[TaskSpec, TaskSpec]:
  """``(paper, ours)``: the registered task, and the task with the flags' overrides.

  ``task`` is a registered name, optionally with field overrides (``"mnist(epochs=2)"``); each
  keyword is a flag that sets the ``TaskSpec`` field of its name (``activation``, ``dataset``,
  ``epochs``, ``batch_size``, ``dropout``), or ``embeddings``, twitter_pos's pretrained vectors
  file (a ``data_options`` entry). None leaves a field as the task has it. ``paper`` is the
  task as registered (the paper's settings), for listing how ``ours`` deviates from it.
  ``set_elsewhere``: ``{field: (flag, value)}`` of the command's other flags that set a field,
  which it applies itself (train.py's ``learning_rates`` and ``seeds`` make the grid). A field
  that ``task``'s overrides set and a flag sets again is refused (`check_set_once`).

  Raises:
    ValueError: naming the flag, for an unknown task, a field set twice or a value the field
      cannot take.
  """
  try:
    base = parse_name(task)[0] if task else None
  except ParseError as e:
    raise ValueError(f"--task {task!r} cannot be parsed: {e.reason}.") from None
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
  check_set_once(task, {**overrides, **(set_elsewhere or {})})
  embeddings = flag_values.get("embeddings")
  if "embeddings" in overrides:
    if embeddings is not None and base != "twitter_pos":
      raise ValueError(f"--embeddings {embeddings} is for --task twitter_pos only, not {task}.")
    options = None if embeddings is None else {**spec.data_options, "embeddings": embeddings}
    overrides["data_options"] = ("embeddings", options)
    del overrides["embeddings"]
  return tasks.get(base), _replace(spec, overrides)


def check_set_once(task: str, flag_values: Mapping[str, tuple[str, Any]]) -> None:
  """Refuses a field that ``task``'s overrides set (``"mnist(epochs=2)"``) and a flag sets
  again, ``{field: (flag, value)}`` (a value of None: the flag is not given; the field
  ``embeddings`` is ``data_options``' entry): neither may silently win.

  Raises:
    ValueError: naming each such field's value in ``task`` and its flag's.
  """
  given = parse_name(task)[1]
  options = given.get("data_options")
  if isinstance(options, dict) and "embeddings" in options:
    given["embeddings"] = options["embeddings"]
  twice = [(f, flag, v) for f, (flag, v) in flag_values.items() if v is not None and f in given]
  if not twice:
    return
  shown = [",".join(map(str, v)) if isinstance(v, list | tuple) else v for _, _, v in twice]
  in_task = " and ".join(
    f"{'data_options embeddings' if f == 'embeddings' else f}={given[f]!r}" for f, _, _ in twice
  )
  by_flags = " and ".join(f"--{flag} {v!r}" for (_, flag, _), v in zip(twice, shown, strict=True))
  raise ValueError(
    f"--task {task!r} sets {in_task}, and {by_flags} set{'s it' if len(twice) == 1 else ' them'}"
    " again; set each field once, in --task or by its flag."
  )


def check_runs(spec: TaskSpec, runs: Mapping[str, tuple[str, Sequence[Any]]]) -> None:
  """Checks the spec of every run a command will train, before any trains: ``runs`` is
  ``{field: (flag, values)}`` (``reproduce``'s ``{"activation": ("activations", [...])}``),
  each combination of one value a field applied to ``spec``.

  Raises:
    ValueError: naming the flag, for a value its field cannot take.
  """
  fields = list(runs)
  for values in itertools.product(*(vs for _, vs in runs.values())):
    _replace(spec, {f: (runs[f][0], v) for f, v in zip(fields, values, strict=True)})


def _replace(spec: TaskSpec, flag_values: Mapping[str, tuple[str, Any]]) -> TaskSpec:
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
  0..4); several (or one followed by a comma, ``7,``) are the seeds themselves, each once; unset
  gives ``default`` (a count, or the seeds). Given empty (``--seeds=``) is refused: an empty
  list is no grid, and would train the default silently."""
  if values is None:
    return list(range(default)) if isinstance(default, int) else list(default)
  _check_not_empty(flag, values, "a count (e.g. 5) or a comma list of seeds (e.g. 0,1,2)")
  text = ",".join(values)
  try:
    seeds = [int(v) for v in values if v.strip()]
  except ValueError:
    seeds = []
  if not seeds:
    raise ValueError(f"--{flag} {text!r} is not a count or a comma list of integer seeds.")
  if len(values) > 1:
    _check_distinct(flag, values, seeds)
    return seeds
  if seeds[0] < 1:
    raise ValueError(f"--{flag} {text!r} is a count of seeds; it must be at least 1.")
  host.check_member_count(seeds[0], flag)  # Before the list is made: 99999999999999 fails here.
  return list(range(start, start + seeds[0]))


def parse_floats(flag: str, values: Sequence[str] | None, default: Sequence[float]) -> list[float]:
  """A list flag of numbers (``--learning_rates=1e-3,1e-4``), each once; unset gives
  ``default``; given empty is refused."""
  if values is None:
    return [float(v) for v in default]
  _check_not_empty(flag, values, "one or more numbers (e.g. 1e-3,1e-4)")
  try:
    numbers = [float(v) for v in values]
  except ValueError:
    raise ValueError(
      f"--{flag} {','.join(values)!r} is not a list of numbers; pass e.g. 1e-3,1e-4."
    ) from None
  _check_distinct(flag, values, numbers)
  return numbers


def parse_names(flag: str, values: Sequence[str] | None, default: Sequence[str]) -> list[str]:
  """A list flag of names (``--activations=gelu,relu``), each once; unset gives ``default``;
  given empty is refused."""
  if values is None:
    return list(default)
  _check_not_empty(flag, values, "one or more names (e.g. gelu,relu)")
  _check_distinct(flag, values, values)
  return list(values)


def _check_not_empty(flag: str, values: Sequence[str], expected: str) -> None:
  if not values:
    raise ValueError(
      f"--{flag} is given empty; give {expected}, or leave --{flag} out for its default."
    )


def _check_distinct(flag: str, values: Sequence[str], parsed: Sequence[Any]) -> None:
  """Refuses a list flag whose values repeat one (``gelu,gelu``; ``0.5,0.50``): each is a run or
  a member of its own, and a repeat would silently be one."""
  repeated = [v for i, v in enumerate(parsed) if v in parsed[:i]]
  if repeated:
    listed = ", ".join(map(repr, dict.fromkeys(repeated)))
    raise ValueError(f"--{flag} {','.join(values)!r} repeats {listed}; give each value once.")


def check_given_once(module_name: str, not_empty: Sequence[str] = ()) -> None:
  """Refuses a flag of the command ``module_name`` given more than once (absl would keep the
  last silently) and an empty value for the flags ``not_empty`` (``--activation=``, which
  would otherwise stand for the default)."""
  for flag in flags.FLAGS.get_key_flags_for_module(module_name):
    if flag.present > 1:
      raise ValueError(
        f"--{flag.name} is given {flag.present} times; give it once (the command would take "
        "the last one silently)."
      )
    if flag.name in not_empty and flag.present and flag.value in ("", []):
      raise ValueError(f"--{flag.name} is empty; give it a value, or leave it out for its default.")


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


def program_name(argv: Sequence[str]) -> str:
  """How a command's one-line errors name it, from the ``argv`` its ``main`` gets (absl's: the
  program as `run` named it first): the file name of a script's path (``train.py``, as
  ``python experiments/train.py`` always printed), else the name it was given (``gelujax
  train``, ``python -m gelujax.train``)."""
  return os.path.basename(argv[0])


def exit_stopped(
  program: str,
  error: BaseException,
  refused: tuple[type[BaseException], ...] = (ValueError,),
  words: Sequence[tuple[str, str]] = (),
) -> NoReturn:
  """Ends the command ``program`` (`program_name`) with one line on stderr for what stopped its
  run: Ctrl-C or ``kill`` (`describe_interrupt`; exit 128 + the signal's number; no checkpoint is
  left half-written), a failure of programs loaded from the compilation cache
  (`gelujax.host.cache_failure`; exit 1), or a value the library refused (an error of a
  ``refused`` type; exit 1). Any other error is raised again, with its traceback: it is a bug.
  ``words``: the command's own words for fields it has no flag for (`name_flags`)."""
  if isinstance(error, KeyboardInterrupt):
    what, status = describe_interrupt(error)
    print(f"{program}: {what}; re-run the same command to resume.", file=sys.stderr)
    _quiet_shutdown()
    sys.exit(status)
  line = host.cache_failure(error)
  if line is None and isinstance(error, refused):
    line = str(error)
  if line is None:
    raise error
  message = f"{program}: error: {name_flags(' '.join(line.split()), flags.FLAGS, words)}"
  _quiet_shutdown()
  sys.exit(message)


def _quiet_shutdown() -> None:
  """Once the command has said in one line why it stops: what background threads report while
  the interpreter shuts down is kept off the terminal. A save that a full disk cut leaves
  Orbax's and TensorStore's callbacks behind, which may fire after Python's executors have shut
  down ("cannot schedule new futures after shutdown", then "Event loop is closed", through a
  thread's excepthook, an unraisable report or asyncio's log). The command is ending: nothing
  is left to report to. Only the commands call it (the library leaves the hooks as it found
  them)."""
  threading.excepthook = lambda report: None
  sys.unraisablehook = lambda report: None
  logging.getLogger("asyncio").setLevel(logging.CRITICAL)
