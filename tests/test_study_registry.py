"""The one registry of studies fixed in code (`gelujax.study.registry`): every committed study
result is an entry, each entry names the code path of its design, and one path runs them all."""

import dataclasses
import re
from pathlib import Path

import pytest

from gelujax.paper import PAPER_TASKS
from gelujax.study import pilot, registry

ROOT = Path(__file__).resolve().parents[1]


def test_every_committed_study_result_is_a_registered_study_in_its_folder():
  """Read from the results themselves: each README's own --render command names a task; every
  task that is not the paper's (nor a paper task with its fields overridden) is an entry, whose
  dataset and name are the result's folder."""
  found = {}
  for readme in sorted(ROOT.glob("results/*/*/README.md")):
    command = re.search(r"python experiments/reproduce\.py --task=(\S+?)[` ]", readme.read_text())
    if command is None:
      continue
    task = command.group(1).strip("'\"")
    if task.split("(")[0].removesuffix("_noise") in PAPER_TASKS:
      continue
    found[task] = readme.parent.relative_to(ROOT / "results").parts
  assert len(found) >= 8
  for task, (dataset, folder) in found.items():
    design = registry.get(task)
    assert (design.dataset, design.name) == (dataset, folder)


def test_each_entry_names_its_designs_code_path():
  """The paths by hand: what the READMEs and refusals cite."""
  expected = {
    "gelu_forms": "gelujax.study.forms.DESIGN",
    "gelu_forms_powered": "gelujax.study.forms.POWERED",
    "twitter_pos_confirm": "gelujax.study.confirm.TWITTER",
    "vit_fashion_mnist_pilot": "gelujax.study.pilot.VIT",
    "transformer_twitter_pos_pilot": "gelujax.study.pilot.TAGGER",
    "char_lm_pilot": "gelujax.study.pilot.CHAR_LM",
    "char_lm_controls_pilot": "gelujax.study.pilot.CHAR_LM_CONTROLS",
    "vit_fashion_mnist_study": "gelujax.study.transformer.VIT",
    "transformer_twitter_pos_study": "gelujax.study.transformer.TAGGER",
    "char_lm_study": "gelujax.study.language.CHAR_LM",
  }
  assert {name: s.where for name, s in registry.STUDIES.items()} == expected
  for name, path in expected.items():
    assert registry.variable(registry.get(name)) == path.rsplit(".", 1)[1]
  # A copy under the same name is still that study; one under another name is its own.
  copy = dataclasses.replace(pilot.VIT, seeds=(0, 1))
  assert registry.variable(copy) == "VIT"
  assert registry.variable(dataclasses.replace(pilot.VIT, name="mine")) == "mine"


def test_an_unknown_study_is_refused_naming_the_studies():
  with pytest.raises(ValueError, match=r"No study is named 'nope': the studies are gelu_forms, "):
    registry.get("nope")


@pytest.mark.e2e
def test_a_new_study_is_a_literal_and_one_entry(monkeypatch, tmp_path):
  """A pilot made by `dataclasses.replace` and entered in the registry runs through the one
  path: its own name reaches the report's refusal of a folder with no runs, and a sequel of the
  forms study is the first design replaced (its task, data and epochs are the first's)."""
  mine = dataclasses.replace(pilot.VIT, name="my_pilot", seeds=(0, 1, 2, 3, 4))
  monkeypatch.setitem(registry.STUDIES, "my_pilot", registry.Study(mine, registry.PILOT))
  configured = []
  with pytest.raises(ValueError, match=r"holds no runs to render.*a my_pilot pilot"):
    registry.reproduce(
      registry.STUDIES["my_pilot"],
      out=tmp_path / "r",
      root=tmp_path,
      data_dir=None,
      train=False,
      command="gelujax reproduce --task=my_pilot --render",
      project=False,
      configure=configured.append,
    )
  assert configured == []  # rendering splits no host
  assert registry.STUDIES["my_pilot"].kind.members(mine) == 2 * 5
  first, powered = registry.get("gelu_forms"), registry.get("gelu_forms_powered")
  assert (powered.task, powered.dataset, powered.epochs) == (first.task, first.dataset, 20)
