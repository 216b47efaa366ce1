"""Parts of one's own are checked when they are made: a record that cannot name the run fails
at once, in one sentence naming the field (a hand-built Parts once trained a whole epoch, then
failed with ``KeyError: 'epochs'``)."""

import dataclasses
import json

import pytest
from tiny_task import tiny

from gelujax import engine


@pytest.mark.parametrize(
  ("record", "message"),
  [
    ({"task": "mine", "dataset": "blobs", "activation": "relu"}, "record has no 'spec'; it must"),
    ({"spec": {}}, "record has no 'task', 'dataset', 'activation'; it must name"),
    ({"task": "m", "dataset": "d", "activation": "relu", "spec": 3}, "record['spec'] is a int"),
    ([("task", "mine")], "record is a list; it must be a dict naming the run"),
    (
      {"task": "m", "dataset": "d", "activation": "relu", "spec": {"epochs": 7}},
      "record['spec']['epochs'] is 7 but epochs is 2; give one number of epochs.",
    ),
  ],
)
def test_a_record_that_cannot_name_the_run_is_refused_when_the_parts_are_made(record, message):
  with pytest.raises(ValueError) as error:
    dataclasses.replace(tiny(epochs=2), record=record)
  assert message in str(error.value) and "\n" not in str(error.value)
  assert str(error.value).startswith("Parts 'tiny': ")


def test_a_spec_without_epochs_takes_the_parts_and_the_run_records_them(tmp_path):
  """The fields the engine reads of the record are filled from the parts: the run trains,
  and config.json and summary.json state its epochs."""
  parts = dataclasses.replace(
    tiny(epochs=2), record={"task": "mine", "dataset": "blobs", "activation": "relu", "spec": {}}
  )
  assert parts.record["spec"] == {"epochs": 2}
  summary = engine.fit(parts, str(tmp_path / "run"), progress=False)
  assert summary["epochs"] == 2
  config = json.loads((tmp_path / "run" / "config.json").read_text())
  assert config["spec"]["epochs"] == 2 and config["task"] == "mine"
