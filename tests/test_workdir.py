"""Tests for gelujax.workdir: one writer, the run's config kept or rebuilt, bounds before work.

The lock is tested against a real second process, disks are real tmpfs mounts (full or
read-only), and memory estimates against sizes counted by hand.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from benchmarks import faults
from gelujax import checkpoints, host, workdir, writers
from gelujax.members import Members
from gelujax.workdir import disk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = {
  "task": "tiny_mnist",
  "dataset": "mnist",
  "activation": "gelu",
  "spec": {"epochs": 2, "batch_size": 32},
  "members": [{"seed": 0, "learning_rate": 0.001}],
}


def hold_lock(path) -> subprocess.Popen:
  """Another process that takes the workdir's lock and keeps it until killed."""
  code = (
    "import sys, time; from gelujax import workdir; workdir.Lock(sys.argv[1]); "
    "print('locked', flush=True); time.sleep(600)"
  )
  process = subprocess.Popen(
    [sys.executable, "-c", code, str(path)],
    env=dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu"),
    stdout=subprocess.PIPE,
    text=True,
  )
  assert process.stdout.readline() == "locked\n"
  return process


@pytest.mark.e2e
def test_a_second_process_is_refused_naming_the_holder_and_a_dead_one_blocks_nothing(tmp_path):
  holder = hold_lock(tmp_path / "run")
  try:
    with pytest.raises(workdir.WorkdirError) as error:
      workdir.Lock(str(tmp_path / "run"))
    message = str(error.value)
    assert f"in use by process {holder.pid} on host {socket.gethostname()}" in message
    assert "\n" not in message and "another `workdir`" in message
  finally:
    holder.send_signal(signal.SIGKILL)  # kill -9: no clean-up runs
    holder.communicate()  # waits, and closes its stdout
  # The lock file is still there, naming the dead process: it blocks nothing.
  assert (tmp_path / "run" / "lock").read_text().startswith(f"{holder.pid} ")
  lock = workdir.Lock(str(tmp_path / "run"))
  assert (tmp_path / "run" / "lock").read_text().startswith(f"{os.getpid()} ")
  lock.release()


@pytest.mark.e2e
def test_a_lock_file_removed_under_a_running_writer_lets_no_second_one_in(tmp_path):
  """``rm workdir/lock`` while another process holds the workdir: the next process makes a new
  lock file, whose lock it could take, but the folder's own lock is still held: refused."""
  holder = hold_lock(tmp_path / "run")
  try:
    (tmp_path / "run" / "lock").unlink()
    with pytest.raises(workdir.WorkdirError, match="one process writes a workdir at a time"):
      workdir.Lock(str(tmp_path / "run"))
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
  workdir.Lock(str(tmp_path / "run")).release()


def test_the_lock_is_held_until_released(tmp_path):
  lock = workdir.Lock(str(tmp_path))
  with pytest.raises(workdir.WorkdirError, match=f"in use by process {os.getpid()}"):
    workdir.Lock(str(tmp_path))  # another open file description, as another process has
  lock.release()
  workdir.Lock(str(tmp_path)).release()


def test_a_lock_that_is_not_a_file_is_refused_by_the_lock_itself(tmp_path):
  (tmp_path / "lock").mkdir()  # as a process that checked the workdir before it appeared finds it
  with pytest.raises(workdir.WorkdirError, match=f"its lock file {tmp_path}/lock is a folder"):
    workdir.Lock(str(tmp_path))
  assert os.listdir(tmp_path) == ["lock"] and os.listdir(tmp_path / "lock") == []


def test_check_writable(tmp_path):
  workdir.check_writable(str(tmp_path / "new" / "deeper"))  # creatable: fine
  (tmp_path / "file").write_text("x")
  with pytest.raises(workdir.WorkdirError, match="is a file, not a folder"):
    workdir.check_writable(str(tmp_path / "file"))
  with pytest.raises(workdir.WorkdirError, match="is a file, so it cannot hold a folder"):
    workdir.check_writable(str(tmp_path / "file" / "run"))
  assert sorted(os.listdir(tmp_path)) == ["file"]  # nothing created


@pytest.mark.mount
def test_check_writable_refuses_a_read_only_disk(tmp_path):
  with faults.tmpfs(tmp_path / "disk", "64k", "ro") as disk:
    with pytest.raises(workdir.WorkdirError, match="is on a read-only file system"):
      workdir.check_writable(str(disk / "run"))


@pytest.mark.mount
def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
  with faults.tmpfs(tmp_path / "disk", "64k") as disk:
    faults.fill_disk(disk)
    records = [{"member": 0, "seed": 0, "learning_rate": 0.1, "epoch": 1.0, "step": 1,
                "diverged": False, "loss": 0.5}] * 1000  # fmt: skip
    with pytest.raises(workdir.WorkdirError) as error, workdir.writing(str(disk / "run")):
      metrics = writers.MetricsWriter(str(disk / "run"), [CONFIG["members"][0]], purge_step=0)
      try:
        metrics.write(records)
      finally:
        metrics.close()
  message = str(error.value)
  # The first file that could not be written: TensorBoard's event file, written before any
  # record; the file, not the folder that holds it.
  board = f"{disk}/run/tensorboard/lr=0.001,seed=0/events.out.tfevents."
  assert message.startswith(f"Cannot write {board}") and "(No space left on device)" in message
  assert "re-run the same command" in message and "\n" not in message


def test_the_file_named_in_tensorstores_words_is_the_file_not_its_database_or_spec():
  """TensorStore's error on a full disk (its words as a save on a full tmpfs gave them, cut
  short) names the OCDBT database folder, then the file, then appends its JSON spec, where the
  folder's path appears again, escaped: the file is the one named."""
  folder = "/w/checkpoints/1.orbax-checkpoint-tmp/default.orbax-checkpoint-tmp/ocdbt.process_0/"
  words = (
    'RESOURCE_EXHAUSTED: Error opening "zarr" driver: Error writing "params.Dense_0.bias/.zarray" '
    f'in OCDBT database at local file "{folder}": Failed writing: "{folder}d/c7e3813867": Failed '
    'to write 192 bytes to file 15: No space left on device [tensorstore_spec=\'{\\"driver\\"'
    f':\\"zarr\\",\\"path\\":\\"{folder}\\"}}\']'
  )
  assert f'\\"{folder}\\"' in words  # the spec's escaped quotes, as TensorStore writes them
  assert disk.failed_file(ValueError(words)) == f"{folder}d/c7e3813867"
  # Where TensorStore names no file, the database folder is not taken for one.
  only_folder = words.replace(f'Failed writing: "{folder}d/c7e3813867": ', "")
  assert disk.failed_file(ValueError(only_folder)) is None


def test_a_member_count_beyond_host_memory_is_refused_without_listing_it():
  host.check_member_count(1000)
  with pytest.raises(ValueError) as error:
    host.check_member_count(99_999_999_999_999)
  assert "99,999,999,999,999 members" in str(error.value)
  assert "13,107,200,000.0 GB in all" in str(error.value)  # 1e14 x 128 KiB, by hand


def test_memory_estimate_counts_state_twice_gradients_updates_and_data():
  params = {"w": jax.ShapeDtypeStruct((100, 10), np.float32)}  # 4,000 bytes
  state = {"params": params, "mu": params, "nu": params}  # 12,000 bytes
  splits = {"train": {"inputs": np.zeros((1000, 8), np.uint8)}}  # 8,000 bytes
  host.check_memory(state, params, 10, 10, splits)
  members = 2_000_000
  with pytest.raises(ValueError) as error:
    host.check_memory(state, params, members, members, splits)
  # 2 x 12,000 + 2 x 4,000 bytes a member on the device, 128 KiB on the host, plus the data.
  expected = members * (32_000 * jax.local_device_count() + 131_072) + 8_000
  message = str(error.value)
  assert f"A grid of 2,000,000 members needs about {expected / 1e9:,.1f} GB" in message
  assert "1,000 parameters" in message and "\n" not in message


def save_checkpoint(path, config, epoch=1):
  checkpointer = checkpoints.Checkpointer(str(path), config=config)
  checkpointer.save(epoch, {"w": np.ones(3, np.float32)}, [])
  checkpointer.close()


def git(folder, *args):
  """``git -C folder args``: its output."""
  env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
             GIT_COMMITTER_EMAIL="t@t")  # fmt: skip
  return subprocess.run(
    ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True, env=env
  ).stdout.strip()


def test_the_software_record_names_every_version_and_the_checkout():
  import flax
  import jaxlib
  import optax

  import gelujax

  (found,) = workdir.software_record(None)
  expected = {
    "gelujax": gelujax.__version__, "python": ".".join(map(str, sys.version_info[:3])),
    "jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__,
    "optax": optax.__version__, "numpy": np.__version__,
  }  # fmt: skip
  assert {k: v for k, v in found.items() if k != "git"} == expected
  # This process's gelujax is this checkout's, or an installed copy that no checkout tracks.
  package = os.path.dirname(gelujax.__file__)
  tracked = subprocess.run(
    ["git", "-C", package, "ls-files", "--error-unmatch", "__init__.py"], capture_output=True
  ).returncode == 0  # fmt: skip
  assert (found["git"] is not None) == tracked
  if tracked:
    assert found["git"]["commit"] == git(package, "rev-parse", "HEAD")


def test_the_commit_is_recorded_only_where_a_checkout_tracks_the_package(tmp_path, monkeypatch):
  repo, package = tmp_path / "repo", tmp_path / "repo" / "pkg"
  package.mkdir(parents=True)
  (package / "__init__.py").write_text("x = 1\n")
  git(repo, "init", "-q")
  git(repo, "add", "pkg/__init__.py")
  git(repo, "commit", "-q", "-m", "first")
  commit = git(repo, "rev-parse", "HEAD")
  check = workdir.config._git_checkout
  assert check(str(package)) == {"commit": commit, "dirty": False}
  (package / "notes.txt").write_text("untracked\n")  # untracked files leave it clean
  assert check(str(package)) == {"commit": commit, "dirty": False}
  (package / "__init__.py").write_text("x = 2\n")
  assert check(str(package)) == {"commit": commit, "dirty": True}
  # Installed inside a repository that does not track it (a virtual environment in a project).
  installed = repo / "venv" / "pkg"
  installed.mkdir(parents=True)
  (installed / "__init__.py").write_text("x = 1\n")
  assert check(str(installed)) is None
  assert check(str(tmp_path / "elsewhere")) is None  # no repository at all
  # No git on the path: recorded as unknown, never a failure.
  empty = tmp_path / "bin"
  empty.mkdir()
  monkeypatch.setenv("PATH", str(empty))
  assert check(str(package)) is None


def test_the_software_record_keeps_every_other_version_and_never_changes_the_identity():
  current = workdir.software_record(None)
  config = {**CONFIG, workdir.SOFTWARE: current}
  assert workdir.identity(config) == workdir.identity(CONFIG)
  assert workdir.software_record(config) == current  # the same software: one entry
  older = [{**current[0], "jax": "0.0.1", "git": None}]
  resumed = workdir.software_record({**CONFIG, workdir.SOFTWARE: older})
  assert resumed == [*older, *current]
  assert workdir.identity({**CONFIG, workdir.SOFTWARE: resumed}) == workdir.identity(CONFIG)


def test_read_config_of_a_new_workdir_is_none(tmp_path):
  assert workdir.read_config(str(tmp_path / "new")) is None


def test_read_config_rebuilds_a_missing_or_broken_config_from_the_checkpoint(tmp_path):
  save_checkpoint(tmp_path, CONFIG)
  assert workdir.read_config(str(tmp_path)) == CONFIG  # no config.json at all
  (tmp_path / "config.json").write_text("{}")
  assert workdir.read_config(str(tmp_path)) == CONFIG
  workdir.write_config(str(tmp_path), CONFIG)
  assert (tmp_path / "config.json.damaged").read_text() == "{}"  # kept
  assert json.loads((tmp_path / "config.json").read_text()) == CONFIG


@pytest.mark.parametrize(
  ("text", "match"),
  [
    ("{}", r"config.json is not a run's config: its 'task' is missing"),
    ('{"task": "t",', r"config.json, line 1: not valid JSON"),
    ("[]", r"config.json is not a run's config: it holds a list"),
  ],
)
def test_read_config_without_a_checkpoint_names_the_file(tmp_path, text, match):
  (tmp_path / "config.json").write_text(text)
  with pytest.raises(workdir.WorkdirError, match=match) as error:
    workdir.read_config(str(tmp_path))
  assert "records the run to rebuild it from" in str(error.value)
  assert "delete" not in str(error.value)


def test_results_without_any_record_of_their_run_are_refused(tmp_path):
  (tmp_path / "metrics.jsonl").write_text('{"member": 0, "epoch": 1.0}\n')
  with pytest.raises(workdir.WorkdirError, match=r"holds metrics\.jsonl but no config\.json"):
    workdir.read_config(str(tmp_path))


def test_check_epochs_refuses_fewer_epochs_than_trained(tmp_path):
  save_checkpoint(tmp_path, CONFIG, epoch=3)
  (tmp_path / "checkpoints" / "5.orbax-checkpoint-tmp-1").mkdir()  # unfinished: not counted
  workdir.check_epochs(str(tmp_path), 3)
  workdir.check_epochs(str(tmp_path), 4)
  with pytest.raises(workdir.WorkdirError, match="trained for 3 epochs, more than `epochs` 2"):
    workdir.check_epochs(str(tmp_path), 2)


# -------------------------------------------------------------- the run's records on resume


def record(member, epoch, loss=0.5):
  return {"member": member, "epoch": float(epoch), "step": int(4 * epoch), "loss": loss}


def lines(records):
  return "".join(json.dumps(r) + "\n" for r in records)


# Two members evaluated twice an epoch: (member, epoch, step) of each record up to epoch 2.
EVALUATIONS = [(m, e, int(4 * e)) for e in (0.5, 1.0, 1.5, 2.0) for m in (0, 1)]
UP_TO_2 = [record(m, e, loss=e + m / 10) for _, e, _ in EVALUATIONS[::2] for m in (0, 1)]
LATER = [record(0, 2.5), record(1, 2.5)]


def test_a_resume_drops_the_later_records_and_a_torn_line_silently(tmp_path, capsys):
  path = tmp_path / "metrics.jsonl"
  path.write_text(lines(UP_TO_2 + LATER) + '{"member": 0, "epo')  # what a kill -9 leaves
  assert workdir.resume_metrics(str(tmp_path), 2, UP_TO_2, EVALUATIONS) == UP_TO_2
  assert path.read_text() == lines(UP_TO_2)
  assert capsys.readouterr().err == ""
  assert sorted(os.listdir(tmp_path)) == ["metrics.jsonl"]


@pytest.mark.parametrize(
  ("damage", "said"),
  [
    (lambda text: text[:-40], "ends before the record of member 1 at epoch 2, line 8"),
    (lambda text: "".join(text.splitlines(True)[:2] + text.splitlines(True)[3:]), "line 3"),
    (lambda text: text.replace('"loss": 1.5', '"loss": 9.5'), "line 5, as the run wrote it"),
    (lambda text: text + lines([UP_TO_2[0]]), "a record of epoch 2 or before on line 9"),
    (lambda text: text.replace("}\n", "}\nnot json\n", 1), "line 2"),
  ],
  ids=["cut", "deleted", "changed", "repeated", "malformed"],
)
def test_records_lost_before_the_checkpoint_are_rewritten_and_the_file_kept(
  tmp_path, capsys, damage, said
):
  path = tmp_path / "metrics.jsonl"
  damaged = damage(lines(UP_TO_2))
  path.write_text(damaged)
  assert workdir.resume_metrics(str(tmp_path), 2, UP_TO_2, EVALUATIONS) == UP_TO_2
  assert path.read_text() == lines(UP_TO_2)  # byte for byte as the run wrote them
  assert (tmp_path / "metrics.jsonl.damaged").read_text() == damaged  # nothing lost
  [line] = capsys.readouterr().err.splitlines()
  assert said in line and "rewritten from the checkpoint of epoch 2" in line
  assert f"kept as {tmp_path}/metrics.jsonl.damaged" in line


def test_a_deleted_metrics_file_is_rewritten_from_the_checkpoint(tmp_path, capsys):
  assert workdir.resume_metrics(str(tmp_path), 2, UP_TO_2, EVALUATIONS) == UP_TO_2
  assert (tmp_path / "metrics.jsonl").read_text() == lines(UP_TO_2)
  assert "metrics.jsonl was missing; rewritten" in capsys.readouterr().err


def test_a_checkpoint_without_records_checks_the_file_against_the_evaluations(tmp_path):
  # What gelujax wrote before checkpoints carried the records: the file is all there is.
  path = tmp_path / "metrics.jsonl"
  path.write_text(lines(UP_TO_2 + LATER))
  assert workdir.resume_metrics(str(tmp_path), 2, None, EVALUATIONS) == UP_TO_2
  assert path.read_text() == lines(UP_TO_2)
  damaged = lines(UP_TO_2[:6] + UP_TO_2[7:])  # the record of member 0 at epoch 2 deleted
  path.write_text(damaged)
  with pytest.raises(workdir.WorkdirError) as error:
    workdir.resume_metrics(str(tmp_path), 2, None, EVALUATIONS)
  message = str(error.value)
  assert "record 7 is the record of member 1 at epoch 2, not the record of member 0 at epoch 2" in (
    message
  )
  assert "written by an older gelujax" in message and "\n" not in message
  assert path.read_text() == damaged and os.listdir(tmp_path) == ["metrics.jsonl"]


def test_results_without_a_checkpoint_are_refused_unless_a_restart_writes_them_again(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text(lines([record(0, 0.5), record(0, 1.0)]))  # stopped before the first save
  workdir.check_resumable(str(tmp_path))
  path.write_text(lines([record(0, 1.0), record(0, 1.5)]))
  with pytest.raises(workdir.WorkdirError) as error:
    workdir.check_resumable(str(tmp_path))
  assert "holds the run's results (metrics.jsonl up to epoch 1.5) but no checkpoint" in str(
    error.value
  )
  path.write_text(lines([record(0, 1.0)]))
  (tmp_path / "summary.json").write_text("{}")  # a finished run saved a checkpoint
  with pytest.raises(workdir.WorkdirError, match=r"results \(summary\.json\) but no checkpoint"):
    workdir.check_resumable(str(tmp_path))
  save_checkpoint(tmp_path, CONFIG, epoch=2)
  workdir.check_resumable(str(tmp_path))


def test_a_file_kept_aside_never_overwrites_one_kept_before(tmp_path):
  path = tmp_path / "metrics.jsonl"
  for n, expected in enumerate(["metrics.jsonl.damaged", "metrics.jsonl.damaged.2"]):
    path.write_text(f"version {n}")
    assert workdir.keep_aside(str(path)) == str(tmp_path / expected)
  assert (tmp_path / "metrics.jsonl.damaged").read_text() == "version 0"
  assert (tmp_path / "metrics.jsonl.damaged.2").read_text() == "version 1"


def test_a_workdir_that_is_not_utf8_is_refused_before_any_work(tmp_path):
  path = os.path.join(str(tmp_path), "run-\udcff")  # how Python hands over argv's byte 0xff
  with pytest.raises(workdir.WorkdirError, match=r"is not UTF-8 \(byte 0xff\)"):
    workdir.check_writable(path)
  assert os.listdir(tmp_path) == []


def as_written_before_records(workdir) -> None:
  """Rewrites the records of a workdir's checkpoints as gelujax wrote them before checkpoints
  carried metrics (format 1: config, identity, epoch and checksums; as in the checkpoints of
  runs trained before, e.g. those of results/ resumed by this code)."""
  for path in (workdir / "checkpoints").glob("*/gelujax/metadata"):
    old = json.loads(path.read_text())
    keep = ("identity", "epoch", "config", "checksums")
    path.write_text(json.dumps({"format": 1, **{k: old[k] for k in keep}}))


@pytest.mark.slow
def test_checkpoints_written_before_records_still_resume_to_the_uninterrupted_result(tmp_path):
  from tiny_task import REFERENCE, REFERENCE_MEMBERS, tiny_like

  from gelujax import engine

  def fit(path, epochs):
    engine.fit(tiny_like(REFERENCE, epochs=epochs), str(path), REFERENCE_MEMBERS, progress=False)

  fit(tmp_path / "uninterrupted", 3)
  fit(tmp_path / "old", 2)
  as_written_before_records(tmp_path / "old")
  shutil.copytree(tmp_path / "old", tmp_path / "old-deleted-line")
  fit(tmp_path / "old", 3)
  old, uninterrupted = tmp_path / "old", tmp_path / "uninterrupted"
  for name in ("metrics.jsonl", "summary.json"):
    assert (old / name).read_bytes() == (uninterrupted / name).read_bytes()
  # The checkpoint saved after the resume holds every record up to it, from the file.
  record = json.loads((old / "checkpoints" / "3" / "gelujax" / "metadata").read_text())
  assert record["format"] == 2
  lines_ = (uninterrupted / "metrics.jsonl").read_text().splitlines()
  assert record["metrics"] == [json.loads(line) for line in lines_]
  # With a line gone and no records in the checkpoint to restore it from: refused, untouched.
  workdir_ = tmp_path / "old-deleted-line"
  text = (workdir_ / "metrics.jsonl").read_text().splitlines(keepends=True)
  (workdir_ / "metrics.jsonl").write_text("".join(text[:2] + text[3:]))
  before = faults.results(workdir_)
  with pytest.raises(workdir.WorkdirError, match="holds none to restore them from"):
    fit(workdir_, 3)
  assert faults.results(workdir_) == before


@pytest.mark.parametrize(
  ("name", "make", "found", "kind"),
  [
    ("metrics.jsonl", os.mkdir, "a folder", "file"),
    ("config.json", os.mkdir, "a folder", "file"),
    ("summary.json", os.mkdir, "a folder", "file"),
    ("tensorboard", lambda p: open(p, "w").close(), "a file", "folder"),
    ("checkpoints", lambda p: open(p, "w").close(), "a file", "folder"),
  ],
)
def test_a_run_name_holding_the_other_kind_is_refused_in_one_line_untouched(
  tmp_path, name, make, found, kind
):
  run = tmp_path / "run"
  run.mkdir()
  make(str(run / name))
  with pytest.raises(workdir.WorkdirError) as error:
    record = {key: CONFIG[key] for key in ("task", "dataset", "activation", "spec")}
    workdir.check_run(record, 2, str(run), Members.from_json(CONFIG["members"]))
  message = str(error.value)
  assert "\n" not in message
  assert f"holds {run / name}, which is {found}, where the run keeps a {kind}" in message
  assert f"`mv {run / name} {run / name}.old`" in message
  assert sorted(os.listdir(run)) == [name]
