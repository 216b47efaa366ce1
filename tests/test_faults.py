"""Faults that need real processes: a second writer, kill -9, signals in and out of a save, the
workdir's files cut, deleted or lost, flags that cannot be used, a damaged compilation cache.

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
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import faults

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
  assert epochs == [(float(e), m) for e in range(1, 101) for m in (0, 1)]  # each logged once


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
def test_sigint_before_training_and_sigterm_mid_epoch_say_one_line_and_resume(lab):
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


@pytest.mark.slow
def test_reproduce_interrupted_during_a_save_says_one_line_and_resumes(lab, tmp_path):
  out = tmp_path / "out"
  command = [
    sys.executable, str(ROOT / "experiments" / "reproduce.py"),
    "--task=tiny_mnist(model='mlp_mnist', data_options={'validation_size': 32})",
    "--activations=relu", "--seeds=4", "--learning_rates=1e-3", "--epochs=30",
    f"--data_dir={lab.data_dir}", f"--out={out}", f"--compilation_cache={lab.cache}",
  ]  # fmt: skip
  checkpoints = out / "runs" / "relu" / "checkpoints"
  for _ in range(5):
    process = subprocess.Popen(
      command, env=lab.env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert faults.wait_for(lambda: faults._saving(checkpoints, 2), poll=0.0005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    if "during the save" in stderr:
      break
  seen = faults.Run(process.returncode, stderr).seen
  assert process.returncode == 130
  assert seen == [
    "reproduce.py: interrupted by SIGINT during the save of the checkpoint of epoch 2, which "
    "was completed first; re-run the same command to resume."
  ]
  assert sorted(os.listdir(checkpoints)) == ["1", "2"]
  timings = json.loads((out / "timings.json").read_text())
  assert timings["relu"]["seconds"] > 0  # the time trained so far is kept


def test_the_fault_script_writes_its_table_and_cifar10_without_data_says_what_to_do(tmp_path):
  result = subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "faults.py"), "--only", "no_cifar",
     "--output-dir", str(tmp_path)],
    capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  report = (tmp_path / "faults.md").read_text()
  assert "python benchmarks/faults.py --only no_cifar" in report
  assert "| CIFAR-10 with no data here | `train.py --task=cifar10 --activation=gelu`" in report
  assert "Faults tried: 1; as promised: 1" in report and report.count("| yes |") == 1
  [row] = json.loads((tmp_path / "faults.json").read_text())
  assert row["ok"], row["seen"]  # one line, no download attempt, no ModuleNotFoundError
  assert row["seen"].startswith("exit 1: train.py: error: Cannot load dataset 'cifar10'")
  assert "(no prepared copy)" in row["seen"] and "Pass --data_dir" in row["seen"]


@pytest.mark.slow
def test_a_workdir_that_cannot_be_written_is_refused_in_one_line(lab):
  is_file, read_only, forbidden = faults.bad_workdirs(lab)
  assert is_file.ok and "is a file, not a folder" in is_file.seen, is_file.seen
  assert read_only.ok and "is on a read-only file system" in read_only.seen, read_only.seen
  # root without its capabilities, in a folder of another user: nothing is written there
  assert forbidden.ok and "is not writable by this user" in forbidden.seen, forbidden.seen


@pytest.mark.slow
def test_records_cut_deleted_or_malformed_before_the_checkpoint_are_restored(lab):
  outcomes = (
    faults.torn_tail(lab, cuts=(400,))  # into member 0's record of epoch 1: both are lost
    + faults.deleted_line(lab, stopped_at=(2,))
    + faults.malformed_metrics(lab)
  )
  for outcome, epochs, line in zip(outcomes, (2, 10, 2), (1, 3, 2), strict=True):
    assert outcome.ok, outcome.seen
    assert_ends_as_uninterrupted(outcome, epochs=epochs, members=2)
    assert outcome.seen.startswith(f"exit 0: {outcome.workdir}/metrics.jsonl ")
    assert f"line {line}" in outcome.seen and "kept as" in outcome.seen
    damaged = (outcome.workdir / "metrics.jsonl.damaged").read_text()  # kept, not deleted
    assert damaged != (outcome.workdir / "metrics.jsonl").read_text()


@pytest.mark.slow
def test_results_whose_checkpoints_were_deleted_are_refused_untouched(lab):
  finished, stopped = faults.deleted_checkpoints(lab)
  for outcome, epochs in ((finished, 10), (stopped, 2)):
    assert outcome.ok, outcome.seen
    assert outcome.seen.startswith(f"exit 1: train.py: error: Workdir {outcome.workdir} holds ")
    assert f"(metrics.jsonl up to epoch {epochs} and summary.json)" in outcome.seen
    for name in ("metrics.jsonl", "summary.json"):  # as the finished run left them
      reference = lab.reference(epochs) / name
      assert (outcome.workdir / name).read_bytes() == reference.read_bytes()
  assert not (finished.workdir / "checkpoints").exists()  # nothing retrained, nothing saved
  assert os.listdir(stopped.workdir / "checkpoints") == []


@pytest.mark.slow
def test_flags_that_cannot_be_used_are_refused_in_one_line(lab):
  workdir, task, seeds, batch = faults.bad_flags(lab)
  for outcome in (workdir, task, seeds, batch):
    assert outcome.ok, outcome.seen
    assert outcome.seen.startswith("exit 1: train.py: error: ") and " / " not in outcome.seen
  assert "--workdir b'" in workdir.seen and "\\xff' is not UTF-8 (byte 0xff)" in workdir.seen
  assert task.seen.endswith("--task b'tiny_mnist\\xff' is not UTF-8 (byte 0xff at position 10); "
                            "flag values must be UTF-8 text.")  # fmt: skip
  # Two different lists, and why they differ.
  assert "seeds=[0, 1] (now lrs=[0.001] seeds=[1, 0]) (the same members in another order" in (
    seeds.seen
  )
  assert batch.seen.endswith("larger than the training split (224 items); it must be at most 224.")


@pytest.mark.slow
def test_a_damaged_compilation_cache_names_the_way_around_it(lab):
  swapped, cut = faults.compilation_cache(lab)
  assert swapped.ok, swapped.seen
  failed, resumed = swapped.seen.split(" — then: ")
  assert failed.startswith("exit 1: train.py: error: ") and "Traceback" not in failed
  assert f"loaded from the compilation cache {lab.root / 'damaged-cache'}" in failed
  assert "re-run the same command with --compilation_cache=none" in failed
  assert resumed == "exit 0: (nothing)"
  for name in ("metrics.jsonl", "summary.json"):  # --compilation_cache=none: compiled afresh
    assert (swapped.workdir / name).read_bytes() == (swapped.reference / name).read_bytes()
  assert cut.ok, cut.seen  # JAX itself tells a cut entry and compiles anew
  assert cut.seen.startswith("exit 0: ") and "compilation cache entry" in cut.seen
