"""Faults that need real processes, done to the files: the workdir's records cut, deleted or
malformed, its checkpoints deleted, a workdir that cannot be written, flags that cannot be used,
a damaged compilation cache, and the fault script itself. See test_faults.py, whose helpers
check each promise on their own here too.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks import faults
from tests.test_faults import ROOT, assert_ends_as_uninterrupted

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  return faults.Lab(tmp_path_factory.mktemp("faults"))


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
  assert row["ok"], row["seen"]  # offline here: one line, no download attempt, no traceback
  assert row["seen"].startswith("exit 1: train.py: error: Cannot load dataset 'cifar10'")
  assert "(no prepared copy)" in row["seen"] and "Pass --data_dir" in row["seen"]


@pytest.mark.slow
def test_a_workdir_that_cannot_be_written_is_refused_in_one_line(lab):
  """A workdir that cannot be created, or only by a user of more rights, from a real train.py:
  exit 1 and one line. (A workdir that is a file, and one on a read-only disk, are
  test_train_cli's test_a_workdir_that_is_a_file_is_refused and
  test_a_workdir_on_a_read_only_disk_is_refused: the same line from the same main.)"""
  cases = ("too_long", "in_proc", "forbidden")
  too_long, in_proc, forbidden = faults.bad_workdirs(lab, cases)
  # root without its capabilities, in a folder of another user: nothing is written there
  assert forbidden.ok and "is not writable by this user" in forbidden.seen, forbidden.seen
  # Refused before any work, in one line, never blamed on the compilation cache.
  for outcome in (too_long, in_proc):
    assert outcome.ok and "compilation cache" not in outcome.seen, outcome.seen
  assert too_long.seen.endswith(
    "bytes, longer than the 255 its file system allows; pass a shorter name."
  )
  assert in_proc.seen == (
    "exit 1: train.py: error: --workdir /proc/x: no folder can be created in /proc (No such file "
    "or directory); pass a folder on a disk you can write."
  )


@pytest.mark.slow
def test_a_workdir_deleted_mid_run_ends_in_one_line_naming_it(lab):
  """`rm -rf` by another process while train.py writes: once the compilation cache had served a
  program, this ended in a FileNotFoundError blamed on the cache, with advice that gave a
  traceback. The whole workdir here; checkpoints/ deleted mid-run, the same fault with more
  asserted of its line, is the next test's."""
  (outcome,) = faults.deleted_while_running(lab, targets=("workdir",))
  assert outcome.ok, outcome.seen


@pytest.mark.slow
def test_checkpoints_deleted_mid_run_end_in_a_line_that_says_what_a_re_run_does(lab):
  """`rm -rf checkpoints` while train.py writes records past epoch 1: the line said "re-run the
  same command to resume", and the re-run refused, as it must (no checkpoint to resume the
  records from). The line says so, and its way to start over loses nothing. (10 epochs: the
  deletion has epochs 2 to 9 to land in, and the uninterrupted run is the one
  ``lab.reference(10)`` the tests of deleted lines and checkpoints compare with.)"""
  workdir, epochs = lab.root / "checkpoints-deleted-mid-run", 10
  hit, ended = faults.delete_mid_run(lab, workdir, workdir / "checkpoints", epochs)
  assert hit and ended.returncode == 1 and len(ended.seen) == 1, ended.seen
  [line] = ended.seen
  # One line naming the folder deleted, not blamed on the compilation cache (the checkpoints
  # case of faults.deleted_while_running, which the test above leaves to this one).
  assert line.startswith(
    f"train.py: error: {workdir}/checkpoints was deleted while this run was writing it"
  ), line
  assert "compilation cache" not in line, line
  records = (workdir / "metrics.jsonl").read_bytes()
  rerun = lab.train(workdir, f"--epochs={epochs}")  # the same command
  assert rerun.returncode == 1 and "no checkpoint to resume them from" in rerun.seen[0]
  assert (workdir / "metrics.jsonl").read_bytes() == records
  assert not re.search(r"re-run[^.]* to resume", line, re.IGNORECASE), line  # none promised
  # Its way to start over, done: the workdir moved aside, whole, and the same command trains
  # the run from the start to the uninterrupted result.
  [(source, target)] = re.findall(r"`mv (\S+) (\S+)`", line)
  assert source == str(workdir)
  os.rename(source, target)
  assert (faults.Path(target) / "metrics.jsonl").read_bytes() == records
  again = lab.train(workdir, f"--epochs={epochs}")
  assert again.returncode == 0, again.stderr
  assert faults.same_results(workdir, lab.reference(epochs))


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
def test_a_damaged_compilation_cache_is_replaced_or_names_the_way_around_it(lab):
  swapped, cut = faults.compilation_cache(lab)
  # JAX does not check a loaded entry against its key: the run fails, naming the way around it.
  assert swapped.ok, swapped.seen
  failed, resumed = swapped.seen.split(" — then: ")
  assert failed.startswith("exit 1: train.py: error: ") and "Traceback" not in failed
  assert f"loaded from the compilation cache {lab.root / 'damaged-cache'}" in failed
  assert "re-run the same command with --compilation_cache=none" in failed
  assert resumed == "exit 0: (nothing)"
  for name in ("metrics.jsonl", "summary.json"):  # --compilation_cache=none: compiled afresh
    assert (swapped.workdir / name).read_bytes() == (swapped.reference / name).read_bytes()
  # A cut entry: one line of gelujax's, not JAX's warning; replaced, so the next run is quiet.
  assert cut.ok, cut.seen
  assert cut.seen.startswith("exit 0: gelujax: the compilation cache ")
  assert "removed 1 entry of it, and the program compiled now is kept in its place" in cut.seen
  assert cut.seen.endswith(" — then: exit 0: (nothing)")
