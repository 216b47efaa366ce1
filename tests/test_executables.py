"""A run's compiled programs kept on disk under what they were traced from
(`gelujax.engine.executables`), through real train.py processes.

Each test runs `experiments/train.py` from a user's folder whose own module holds the activation
(``user_pkg/acts.py``, as a researcher iterating on one would), with a compilation cache of the
test's own. JAX says in its log (``JAX_LOG_COMPILES=1``) each program it traces, so the tests
see which programs a process traced and which it loaded.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_task import write_mnist_files

from gelujax.engine import executables

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "experiments" / "train.py"
TASK = "--task=tiny_mnist(data_options={'validation_size': 32})"
PROGRAMS = ("init", "shuffle", "train_segment", "evaluate")
# JAX's log line for each program it traces, by the name of its function.
TRACED = {
  "init": "Finished tracing init_members",
  "shuffle": "Finished tracing shuffle",
  "train_segment": "Finished tracing train_segment",
  "evaluate": "Finished tracing evaluate",
}


def tanh_module(scale: str = "") -> str:
  return f"import jax.numpy as jnp\n\n\ndef act(x):\n  return jnp.tanh(x){scale}\n"


@pytest.fixture
def lab(tmp_path):
  """A user's folder: their package with ``act`` (tanh), and MNIST-format files."""
  (tmp_path / "user_pkg").mkdir()
  (tmp_path / "user_pkg" / "__init__.py").write_text("")
  (tmp_path / "user_pkg" / "acts.py").write_text(tanh_module())
  write_mnist_files(str(tmp_path / "mnist"))
  return tmp_path


def train(lab: Path, name: str, cache: str | Path) -> subprocess.CompletedProcess:
  """train.py run from the user's folder, into the workdir ``name``, with ``cache``."""
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", JAX_LOG_COMPILES="1")
  return subprocess.run(
    [sys.executable, str(TRAIN), TASK, f"--data_dir={lab / 'mnist'}", f"--workdir={lab / name}",
     "--seeds=2", "--learning_rates=1e-3", "--epochs=2", "--activation=user_pkg.acts:act",
     f"--compilation_cache={cache}"],
    cwd=lab, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip


def traced(result: subprocess.CompletedProcess) -> list[str]:
  assert result.returncode == 0, result.stderr[-3000:]
  return [name for name in PROGRAMS if TRACED[name] in result.stderr]


def said(result: subprocess.CompletedProcess) -> list[str]:
  """The lines gelujax said about compiled programs."""
  return [line for line in result.stderr.splitlines() if "compiled program" in line]


def results(lab: Path, name: str) -> tuple[bytes, bytes]:
  return (lab / name / "metrics.jsonl").read_bytes(), (lab / name / "summary.json").read_bytes()


def entries(cache: Path) -> dict[str, Path]:
  """The cache's entries by program name (one each: these runs call each with one signature,
  evaluate with two: its validation and test splits' shapes differ)."""
  found = {}
  for path in sorted((cache / executables.FOLDER).glob("*.exe")):
    found.setdefault(path.name.split("-", 1)[0], path)
  return found


def test_a_second_run_loads_every_program_without_tracing_and_trains_the_same_bits(lab):
  """The first run traces and compiles the four programs and keeps them; the same command again
  traces none of them, and its records are the first run's, bit for bit (the same executables),
  and those of a run that keeps nothing (``--compilation_cache=none``: compiled afresh)."""
  cache = lab / "cache"
  first = train(lab, "first", cache)
  assert traced(first) == list(PROGRAMS)
  assert sorted(entries(cache)) == sorted(PROGRAMS)
  again = train(lab, "again", cache)
  assert traced(again) == []
  assert said(again) == []
  fresh = train(lab, "fresh", "none")
  assert traced(fresh) == list(PROGRAMS)
  assert results(lab, "again") == results(lab, "first") == results(lab, "fresh")


def test_an_edited_activation_module_is_compiled_anew_never_loaded_stale(lab):
  """The program's key names the activation only as ``user_pkg.acts:act``: its entry must not
  outlive an edit of the file. After the edit the run traces again and trains the edited
  function, as a run that keeps nothing does; the run after that loads the new entries."""
  cache = lab / "cache"
  before = train(lab, "before", cache)
  assert traced(before) == list(PROGRAMS)
  (lab / "user_pkg" / "acts.py").write_text(tanh_module(" * 0.5"))
  edited = train(lab, "edited", cache)
  assert traced(edited) == list(PROGRAMS)
  assert said(edited) == []  # A stale entry is a miss, not damage.
  assert traced(train(lab, "fresh", "none")) == list(PROGRAMS)
  assert results(lab, "edited") == results(lab, "fresh") != results(lab, "before")
  assert traced(train(lab, "after", cache)) == []


def test_damaged_and_swapped_entries_are_said_compiled_anew_and_replaced(lab):
  """One entry's executable has a byte flipped, and two entries are swapped on disk (each file
  holds the other program): the run says so for each file, compiles those programs anew and
  trains the first run's bits; the next run loads every program without a word."""
  cache = lab / "cache"
  train(lab, "first", cache)
  found = entries(cache)
  segment = bytearray(found["train_segment"].read_bytes())
  segment[-1000] ^= 0xFF
  found["train_segment"].write_bytes(segment)
  init, shuffle = found["init"].read_bytes(), found["shuffle"].read_bytes()
  found["init"].write_bytes(shuffle)
  found["shuffle"].write_bytes(init)
  damaged = train(lab, "damaged", cache)
  assert sorted(traced(damaged)) == ["init", "shuffle", "train_segment"]
  lines = said(damaged)
  assert len(lines) == 3, lines
  assert (
    f"gelujax: the compiled program {found['train_segment']} is cut short or damaged" in (lines[2])
  )
  for name in ("init", "shuffle"):
    assert any(f"{found[name]} holds another program;" in line for line in lines), lines
  assert all(line.endswith("it is compiled anew and the file replaced.") for line in lines)
  assert results(lab, "damaged") == results(lab, "first")
  again = train(lab, "again", cache)
  assert (traced(again), said(again)) == ([], [])


def test_a_folder_that_cannot_be_written_costs_one_line_not_the_run(lab):
  """A file where the entries' folder would be: the run says once that it could not keep its
  programs, and trains as a run that keeps nothing does."""
  cache = lab / "cache"
  cache.mkdir()
  (cache / executables.FOLDER).write_text("not a folder\n")
  blocked = train(lab, "blocked", cache)
  lines = [line for line in blocked.stderr.splitlines() if "could not keep" in line]
  assert lines == [
    f"gelujax: could not keep compiled programs in {cache / executables.FOLDER} "
    "(FileExistsError: File exists); the next run compiles them again."
  ], blocked.stderr[-2000:]
  train(lab, "fresh", "none")
  assert results(lab, "blocked") == results(lab, "fresh")


def test_a_process_whose_main_has_no_file_keeps_nothing(lab):
  """Code typed into ``python -c`` (or a notebook) could change without any file changing, so
  such a process keeps no entry, though JAX's cache folder is set."""
  code = (
    "from gelujax import engine, tasks\n"
    "from gelujax.members import Members\n"
    f"task = tasks.get(\"tiny_mnist(data_options={{'validation_size': 32}}, epochs=1)\")\n"
    f"engine.fit(task, {str(lab / 'run')!r}, Members((1e-3,), (0,)), "
    f"data_dir={str(lab / 'mnist')!r})\n"
  )
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu",
             JAX_COMPILATION_CACHE_DIR=str(lab / "cache"))  # fmt: skip
  done = subprocess.run(
    [sys.executable, "-c", code], cwd=lab, env=env, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, done.stderr[-3000:]
  assert (lab / "run" / "summary.json").exists()
  assert not (lab / "cache" / executables.FOLDER).exists()
