"""Faults that need real processes: a second writer, kill -9, signals in and out of a save.
(The workdir's files cut, deleted or lost, flags that cannot be used and a damaged compilation
cache are in test_faults_on_disk.py: a module of its own, which the other pytest-xdist worker
runs beside this one.)

Each runs experiments/train.py (or reproduce.py) as a subprocess on tiny_mnist, through the
fault injection of benchmarks/faults.py, and checks what the user sees: the exact stderr
lines, the exit status and the files left behind. Besides faults.py's own verdict (``ok``),
each test checks the promise on its own: the files read here, line by line, against an
uninterrupted run's bytes and against the records a run of that many epochs must hold. (Faults
one process can cause, such as bytes flipped on disk or a full disk, are tested in
test_train_cli.py, test_checkpoints.py, test_writers.py and test_workdir.py.)
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import faults

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

ROOT = faults.ROOT


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  return faults.Lab(tmp_path_factory.mktemp("faults"))


def read_records(workdir: Path) -> list[dict]:
  """metrics.jsonl parsed here, one JSON object a line (not by gelujax's reader)."""
  return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def assert_ends_as_uninterrupted(
  outcome: faults.Outcome, epochs: int, members: int, evaluations: int = 1
) -> None:
  """The workdir holds what an uninterrupted run of ``epochs`` holds: its metrics.jsonl and
  summary.json byte for byte, each evaluation of each member once and in order, a summary
  whose final values are each member's last record, and no unfinished checkpoint."""
  workdir, reference = outcome.workdir, outcome.reference
  for name in ("metrics.jsonl", "summary.json"):
    assert (workdir / name).read_bytes() == (reference / name).read_bytes(), name
  records = read_records(workdir)
  keys = [(r["epoch"], r["member"]) for r in records]
  assert len(keys) == epochs * evaluations * members == len(set(keys))
  assert keys == sorted(keys) and keys[-1] == (epochs, members - 1)
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == epochs and len(summary["members"]) == members
  for member, kept in enumerate(summary["members"]):
    last = [r for r in records if r["member"] == member][-1]
    assert kept["final"]["train_loss"] == last["train_loss"]
  assert not [n for n in os.listdir(workdir / "checkpoints") if not n.isdigit()]


@pytest.mark.slow
def test_a_second_writer_is_refused_and_a_killed_writer_blocks_nothing(lab):
  refused, resumed = faults.second_writer(lab)
  assert refused.ok, refused.seen
  assert refused.seen.startswith("exit 1: train.py: error: Workdir ")
  assert "is in use by process" in refused.seen and "another --workdir" in refused.seen
  assert resumed.ok, resumed.seen  # after kill -9 of the holder, the same command resumes
  assert resumed.seen == "exit 0: (nothing)"
  epochs = [(r["epoch"], r["member"]) for r in read_records(resumed.workdir)]
  assert epochs == [(float(e), m) for e in range(1, 21) for m in (0, 1)]  # each logged once


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_save_finishes_it_and_says_one_line(lab, signum):
  outcome = faults.signal_during_save(lab, signum)
  name = signal.Signals(signum).name
  assert outcome.seen == (
    f"exit {128 + signum}: train.py: interrupted by {name} during the save of the checkpoint "
    "of epoch 3, which was completed first; re-run the same command to resume."
  )
  assert outcome.ok  # checkpoint 3 complete, nothing unfinished left, the rerun resumes
  assert_ends_as_uninterrupted(outcome, epochs=5, members=4)


@pytest.mark.slow
def test_kill_9_mid_save_and_mid_epoch_resume_to_the_uninterrupted_result(lab):
  mid_save, mid_epoch = faults.kill_9(lab)
  # The kill really landed inside the save: Orbax's temporary folder was left behind ...
  assert "2.orbax-checkpoint-tmp" in mid_save.caused_by, mid_save.caused_by
  assert mid_save.ok and mid_save.seen == "exit 0: (nothing)", mid_save.seen
  # ... never taken for a checkpoint, and removed by the next save.
  assert sorted(os.listdir(mid_save.workdir / "checkpoints")) == ["4", "5"]
  assert_ends_as_uninterrupted(mid_save, epochs=5, members=4)
  assert mid_epoch.ok and mid_epoch.seen == "exit 0: (nothing)", mid_epoch.seen
  assert_ends_as_uninterrupted(mid_epoch, epochs=4, members=2, evaluations=2)


@pytest.mark.slow
def test_sigint_is_ignored_during_a_save_as_outside_one_when_the_process_ignores_it(lab):
  """A script's `cmd &` starts train.py with SIGINT ignored: the save used to install its own
  handler and stop the run with exit 130, while outside a save the signal was ignored. (The
  save's run is of 5 epochs: its uninterrupted run is the one the save's other faults make.)"""
  save, epoch = faults.ignored_sigint(lab)
  for outcome in (save, epoch):
    assert outcome.ok, outcome.seen
  assert "during a save" in save.fault and "mid-epoch" in epoch.fault
  assert_ends_as_uninterrupted(save, epochs=5, members=4)
  assert_ends_as_uninterrupted(epoch, epochs=4, members=2, evaluations=2)


@pytest.mark.slow
def test_sigint_whenever_it_lands_and_sigterm_mid_epoch_say_one_line_and_resume(lab):
  """SIGINT from before any step into the first steps (Python's own handler's KeyboardInterrupt,
  raised in JAX's garbage-collection callback, was dropped there and the run exited 0), each
  moment in a run of its own; SIGTERM mid-epoch."""
  sigint, sigterm = faults.interrupts(lab)
  assert sigint.seen == (
    "exit 130: train.py: interrupted by SIGINT; re-run the same command to resume. — then: "
    "exit 0: (nothing)"
  )
  assert sigterm.seen == (
    "exit 143: train.py: interrupted by SIGTERM; re-run the same command to resume. — then: "
    "exit 0: (nothing)"
  )
  for outcome in (sigint, sigterm):
    assert outcome.ok
    assert_ends_as_uninterrupted(outcome, epochs=4, members=2, evaluations=2)


def reproduce_command(lab, out: Path, seeds: int, epochs: int) -> list[str]:
  """reproduce.py training relu on tiny_mnist into ``out``, from the lab's data and cache."""
  return [
    sys.executable, str(ROOT / "experiments" / "reproduce.py"),
    "--task=tiny_mnist(model='mlp_mnist', data_options={'validation_size': 32})",
    "--activations=relu", f"--seeds={seeds}", "--learning_rates=1e-3", f"--epochs={epochs}",
    f"--data_dir={lab.data_dir}", f"--out={out}", f"--compilation_cache={lab.cache}",
  ]  # fmt: skip


@pytest.mark.slow
def test_reproduce_interrupted_during_a_save_says_one_line_and_resumes(lab, tmp_path):
  out = tmp_path / "out"
  command = reproduce_command(lab, out, seeds=4, epochs=30)
  checkpoints = out / "runs" / "relu" / "checkpoints"
  for _ in range(5):
    process = subprocess.Popen(
      command, env=lab.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    hit = faults.wait_for(lambda: faults._saving(checkpoints, 2), poll=0.0005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    if hit and "during the save" in stderr:
      break
    shutil.rmtree(out, ignore_errors=True)  # Missed the save (it can be brief): again.
  seen = faults.Run(process.returncode, stderr).seen
  assert process.returncode == 130
  assert seen == [
    "reproduce.py: interrupted by SIGINT during the save of the checkpoint of epoch 2, which "
    "was completed first; re-run the same command to resume."
  ]
  assert sorted(os.listdir(checkpoints)) == ["1", "2"]
  timings = json.loads((out / "timings.json").read_text())
  assert timings["relu"]["seconds"] > 0  # the time trained so far is kept


@pytest.mark.slow
def test_reproduce_killed_by_sigkill_keeps_the_time_it_trained(lab, tmp_path):
  """kill -9 runs no handler (as a session's end): the time trained until a few seconds before
  is in timings.json all the same, written as the grid trains."""
  from gelujax.study import grids

  out = tmp_path / "out"
  command = reproduce_command(lab, out, seeds=2, epochs=400)
  path = out / "timings.json"

  def seconds() -> float:
    try:
      return json.loads(path.read_text())["relu"]["seconds"]
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
      return 0.0

  process = subprocess.Popen(
    command, env=lab.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  begun = faults.wait_for(lambda: (out / "runs" / "relu" / "checkpoints").exists(), poll=0.05)
  started = faults.wait_for(lambda: seconds() >= 2 * grids.CLOCK_SECONDS, timeout=60, poll=0.05)
  process.kill()
  process.communicate(timeout=60)
  assert begun and started and process.returncode == -signal.SIGKILL
  kept = seconds()
  assert 2 * grids.CLOCK_SECONDS <= kept < 3 * grids.CLOCK_SECONDS
  timings = json.loads(path.read_text())
  assert len(timings["relu"]["machines"]) == 1 and not (out / "timings.json.tmp").exists()
