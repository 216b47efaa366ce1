"""Tests for gelujax.writers: the workdir's JSON, metrics.jsonl and TensorBoard files."""

import json
import math
import os
import time

import numpy as np
import pytest
from tensorboard_events import event_pb2, read_event_protos, read_events, read_hparams

from benchmarks import faults
from gelujax import workdir as workdirs
from gelujax import writers

MEMBERS = [{"seed": 0, "learning_rate": 1e-3}, {"seed": 1, "learning_rate": 1e-3}]


def test_a_resumed_runs_event_file_purges_the_steps_it_rewrites(tmp_path):
  written_from = time.time()
  first = writers.EventFile(str(tmp_path))
  first.add_scalar("loss", 0.5, 10)
  first.add_scalar("loss", 0.25, 20)
  first.close()
  resumed = writers.EventFile(str(tmp_path), purge_step=11)
  resumed.add_scalar("loss", 0.375, 20)
  resumed.close()
  written_until = time.time()
  events = read_event_protos(str(tmp_path))
  assert [e.file_version for e in events if e.file_version] == ["brain.Event:2"] * 3
  start = [e for e in events if e.HasField("session_log")]
  assert len(start) == 1 and start[0].step == 11
  assert start[0].session_log.status == event_pb2.SessionLog.START
  assert read_events(str(tmp_path)) == [(10, "loss", 0.5), (20, "loss", 0.25), (20, "loss", 0.375)]
  # Each event is stamped with the wall time it was written at.
  assert all(written_from <= e.wall_time <= written_until for e in events)


def test_write_json_writes_non_finite_as_null_and_numpy_as_python(tmp_path):
  path = tmp_path / "new" / "x.json"  # The parent is created.
  obj = {"a": (1, np.float32(2.5), math.nan), "b": None, 3: np.array([np.inf, -1.0])}
  workdirs.write_json(path, obj | {"c": np.int64(7), "d": np.bool_(True)})
  text = path.read_text()
  assert "NaN" not in text and "Infinity" not in text
  expected = {"a": [1, 2.5, None], "b": None, "3": [None, -1.0], "c": 7, "d": True}
  assert json.loads(text) == expected
  assert os.listdir(path.parent) == ["x.json"]  # No temporary file left behind.
  with pytest.raises(TypeError):
    workdirs.write_json(path, {"a": object()})
  assert workdirs.read_json(path) == expected  # The old file survives a failed write...
  assert os.listdir(path.parent) == ["x.json"]  # ... which leaves nothing behind.


def test_read_json_names_a_malformed_file(tmp_path):
  path = tmp_path / "summary.json"
  path.write_text('{"epochs": 3')
  with pytest.raises(ValueError, match=r"summary\.json, line 1: not valid JSON") as error:
    workdirs.read_json(path)
  assert "delete" not in str(error.value)  # Never advises deleting a file of results.


def test_make_records_maps_non_finite_to_null():
  records = writers.make_records(
    MEMBERS,
    1.5,
    30,
    [False, True],
    {"train_loss": np.array([0.25, np.nan]), "test_error": np.array([0.5, np.inf])},
  )
  assert records == [
    {"member": 0, "seed": 0, "learning_rate": 1e-3, "epoch": 1.5, "step": 30,
     "diverged": False, "train_loss": 0.25, "test_error": 0.5},
    {"member": 1, "seed": 1, "learning_rate": 1e-3, "epoch": 1.5, "step": 30,
     "diverged": True, "train_loss": None, "test_error": None},
  ]  # fmt: skip


def test_metrics_writer_appends_lines_and_tensorboard_scalars(tmp_path):
  workdir = str(tmp_path)
  writer = writers.MetricsWriter(workdir, MEMBERS, purge_step=0)
  for epoch in (1, 2):
    writer.write(writers.make_records(
      MEMBERS, epoch, 10 * epoch, [False, False],
      {"train_loss": np.array([1.0 / epoch, 2.0 / epoch]), "validation_loss": np.array([3, 4])},
    ))  # fmt: skip
  writer.close()
  records = workdirs.read_metrics(workdir)
  assert [(r["member"], r["epoch"], r["train_loss"]) for r in records] == [
    (0, 1.0, 1.0), (1, 1.0, 2.0), (0, 2.0, 0.5), (1, 2.0, 1.0)
  ]  # fmt: skip
  board = os.path.join(workdir, "tensorboard", "lr=0.001,seed=1")
  assert sorted(read_events(board)) == [
    (10, "train_loss", 2.0), (10, "validation_loss", 4.0),
    (20, "train_loss", 1.0), (20, "validation_loss", 4.0),
  ]  # fmt: skip


def test_each_member_gets_its_hyperparameters_for_tensorboards_hparams_plugin(tmp_path):
  """The run's hyperparameters and each member's learning rate and seed, as TensorBoard's
  hparams plugin reads them (decoded with tensorboardX's protocol buffers), once a writer."""
  hparams = {"task": "tiny", "activation": "myacts:squareplus", "dropout": 0.5, "flag": True}
  writer = writers.MetricsWriter(str(tmp_path), MEMBERS, purge_step=0, hparams=hparams)
  writer.close()
  for m in MEMBERS:
    board = os.path.join(tmp_path, "tensorboard", f"lr=0.001,seed={m['seed']}")
    assert read_hparams(board) == [
      {**hparams, "learning_rate": m["learning_rate"], "seed": float(m["seed"])}
    ]
    assert read_events(board) == []  # no scalar among them


def test_the_training_loss_of_every_nth_step_goes_to_tensorboard(tmp_path):
  """A segment's per-step losses: the loss of step ``first + s`` at TensorBoard step ``first +
  s + 1`` (the steps done, as records count them), every ``step_loss_every``-th, a non-finite
  one left out."""
  writer = writers.MetricsWriter(str(tmp_path), MEMBERS, purge_step=0, step_loss_every=2)
  losses = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, np.nan, 7.0, np.inf]], np.float32)
  writer.write_step_losses(10, losses)  # steps 11-14 done
  writer.write([])
  writer.close()
  boards = [os.path.join(tmp_path, "tensorboard", f"lr=0.001,seed={i}") for i in (0, 1)]
  assert read_events(boards[0]) == [(12, "train_loss_step", 2.0), (14, "train_loss_step", 4.0)]
  assert read_events(boards[1]) == []  # NaN at step 12, inf at step 14
  # Every step of a short epoch; about 100 points of a long one.
  intervals = {n: writers.step_loss_interval(n) for n in (1, 2, 100, 101, 429, 430)}
  assert intervals == {1: 1, 2: 1, 100: 1, 101: 2, 429: 5, 430: 5}


def make_record(member, epoch, **values):
  return {"member": member, "seed": member, "learning_rate": 0.1, "epoch": epoch,
          "step": int(epoch * 10), "diverged": False, **values}  # fmt: skip


def test_summarize_picks_lowest_selection_metric_and_last_record():
  members = [{"seed": 0, "learning_rate": 0.1}, {"seed": 1, "learning_rate": 0.1}]
  config = {"task": "t", "dataset": "d", "activation": "gelu", "spec": {"epochs": 3},
            "members": members}  # fmt: skip
  records = [
    make_record(0, 1.0, validation_loss=0.5, test_loss=0.6),
    make_record(1, 1.0, validation_loss=None, test_loss=None),
    make_record(0, 2.0, validation_loss=0.3, test_loss=0.7),
    make_record(1, 2.0, validation_loss=0.9, test_loss=1.0),
    make_record(0, 3.0, validation_loss=0.4, test_loss=0.2),
  ]
  summary = workdirs.summarize(config, records, [None, 2], "validation_loss")
  assert summary["task"] == "t" and summary["epochs"] == 3
  first, second = summary["members"]
  assert first["best_epoch"] == 2.0 and first["best"] == {"validation_loss": 0.3, "test_loss": 0.7}
  assert first["final"] == {"validation_loss": 0.4, "test_loss": 0.2}
  assert not first["diverged"] and first["diverged_epoch"] is None
  assert second["diverged"] and second["diverged_epoch"] == 2
  assert second["best_epoch"] == 2.0  # the null evaluation is never the best


def test_summarize_selects_on_test_without_validation_split():
  config = {"task": "t", "dataset": "d", "activation": "gelu", "spec": {"epochs": 2},
            "members": [{"seed": 0, "learning_rate": 0.1}]}  # fmt: skip
  records = [make_record(0, 1.0, test_loss=0.2), make_record(0, 2.0, test_loss=0.3)]
  summary = workdirs.summarize(config, records, [None], "validation_loss")
  assert summary["members"][0]["best_epoch"] == 1.0


def test_progress_bar_writes_whole_lines_to_a_log(capsys):
  # Under pytest stderr is not a terminal, as in `reproduce.py ... 2> log`.
  bar = writers.progress_bar(total=3, initial=1, enabled=True)
  bar.update(2)
  bar.close()
  err = capsys.readouterr().err
  assert "\r" not in err and err.endswith("\n")
  lines = err.splitlines()
  assert lines[0].startswith(" 33%") and "1/3" in lines[0]
  assert lines[-1].startswith("100%") and "3/3" in lines[-1] and "step" in lines[-1]


def test_progress_bar_disabled_writes_nothing(capsys):
  bar = writers.progress_bar(total=3, initial=0, enabled=False)
  bar.update(3)
  bar.close()
  assert capsys.readouterr().err == ""


def test_a_torn_last_line_is_left_out_and_a_resume_rewrites_it(tmp_path):
  records = [{"member": 0, "epoch": e, "step": e} for e in (1.0, 2.0)]
  text = "".join(json.dumps(r) + "\n" for r in records)
  (tmp_path / "metrics.jsonl").write_text(text + '{"member": 0, "epo')  # an append cut short
  assert workdirs.read_metrics(str(tmp_path)) == records
  workdirs.write_metrics(str(tmp_path), workdirs.read_metrics(str(tmp_path)))
  assert (tmp_path / "metrics.jsonl").read_text() == text


def test_a_malformed_line_inside_metrics_is_named_with_its_line(tmp_path):
  (tmp_path / "metrics.jsonl").write_text('{"epoch": 1.0}\n{"epoch": \n{"epoch": 2.0}\n')
  with pytest.raises(ValueError, match=r"metrics\.jsonl, line 2: not a JSON record") as error:
    workdirs.read_metrics(str(tmp_path))
  assert "delete" not in str(error.value)


@pytest.mark.mount
def test_writes_on_a_full_disk_keep_the_old_files_whole(tmp_path):
  with faults.tmpfs(tmp_path / "disk", "64k") as disk:
    path = disk / "summary.json"
    workdirs.write_json(path, {"epochs": 2})
    (disk / "metrics.jsonl").write_text('{"member": 0, "epoch": 1.0}\n' * 20)
    filler = faults.fill_disk(disk)
    with pytest.raises(OSError, match="No space left on device") as error:
      workdirs.write_json(path, {"epochs": 3, "members": ["x" * 100] * 200})
    assert error.value.filename == str(path)  # the file, not its temporary twin
    assert workdirs.read_json(path) == {"epochs": 2}  # the old file, whole
    with pytest.raises(OSError, match="No space left on device"):
      records = workdirs.read_metrics(str(disk))  # rewriting 10 of 20 needs a page of disk
      workdirs.write_metrics(str(disk), records[:10])
    assert len(workdirs.read_metrics(str(disk))) == 20  # untouched
    assert sorted(os.listdir(disk)) == ["filler", "metrics.jsonl", "summary.json"]
    os.remove(filler)


def test_summarize_takes_the_earliest_of_tied_best_evaluations():
  """The tie rule the studies state: where evaluations tie on the selection metric, the best is
  the earliest (epochs 1 and 3 tie here, and 2 is worse)."""
  config = {"task": "t", "dataset": "d", "activation": "gelu", "spec": {"epochs": 3},
            "members": [{"seed": 0, "learning_rate": 0.1}]}  # fmt: skip
  records = [
    make_record(0, 1.0, validation_error=0.125, test_error=0.2),
    make_record(0, 2.0, validation_error=0.25, test_error=0.1),
    make_record(0, 3.0, validation_error=0.125, test_error=0.15),
  ]
  summary = workdirs.summarize(config, records, [None], "validation_error")
  assert summary["members"][0]["best_epoch"] == 1.0
  assert summary["members"][0]["best"]["test_error"] == 0.2
