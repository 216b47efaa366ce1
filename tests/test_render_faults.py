"""`reproduce.py --render` of a result whose runs' files were changed on disk after the trainer
wrote them, as a user (or a damaged disk) changes them: what the user sees.

A render reads each value from the runs' records (metrics.jsonl), never from a run's
summary.json, whose values it derives from them again; a run whose records are not every
evaluation it made (emptied, cut short, a last line lost, a member missing) is refused in one
line naming its metrics.jsonl, and the result's files are left as they were.

Each case copies a small committed result (results/fashion_mnist/mnist_ae, or the forms study),
changes the bytes of one file of its runs, and renders the copy with the command its README
gives (`--out` the copy), every case in one process (`run_mains`).
"""

import os
import shutil
from pathlib import Path

import pytest
from run_mains import run_mains

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
AE = REPO / "results" / "fashion_mnist" / "mnist_ae"
FORMS = REPO / "results" / "fashion_mnist" / "gelu_forms"
RESULT_FILES = ("table.md", "summary.json", "README.md")
# relu_eval's member 0 (seed 3, lr 1e-3): its final (and best, the last epoch) test MSE.
RELU_EVAL_SEED_3 = "0.01055470962524414"


def edit_summary(out):
  """A member's value in an evaluation run's summary.json, edited by hand (the median it sits
  in moves if it is read: 0.01055 -> 0.01019)."""
  path = out / "runs" / "relu_eval" / "summary.json"
  text = path.read_text()
  assert text.count(RELU_EVAL_SEED_3) == 2  # best.test_loss and final.test_loss
  path.write_text(text.replace(RELU_EVAL_SEED_3, "0.00155470962524414"))
  return None


def empty_selection(out):
  path = out / "runs" / "gelu" / "metrics.jsonl"
  path.write_bytes(b"")
  return path


def lose_last_line(out):
  """An evaluation run's metrics.jsonl without its last line (member 5's last epoch)."""
  path = out / "runs" / "relu_eval" / "metrics.jsonl"
  lines = path.read_bytes().splitlines(keepends=True)
  path.write_bytes(b"".join(lines[:-1]))
  return path


def cut_last_line(out):
  """The last line cut in the middle, as a copy that ran out of space leaves it."""
  path = out / "runs" / "relu_eval" / "metrics.jsonl"
  data = path.read_bytes()
  path.write_bytes(data[: -len(data.splitlines()[-1]) // 2])
  return path


def drop_member(out):
  """Every record of member 1 of a selection grid deleted."""
  path = out / "runs" / "elu" / "metrics.jsonl"
  lines = path.read_bytes().splitlines(keepends=True)
  path.write_bytes(b"".join(line for line in lines if b'"member": 1,' not in line))
  return path


def damage_forms(out):
  """The issue's case: one run's metrics.jsonl emptied, another's cut from 600 lines to 100."""
  emptied = out / "runs" / "gelu_tanh_float32" / "metrics.jsonl"
  emptied.write_bytes(b"")
  cut = out / "runs" / "relu_bfloat16" / "metrics.jsonl"
  lines = cut.read_bytes().splitlines(keepends=True)
  assert len(lines) == 600
  cut.write_bytes(b"".join(lines[:100]))
  return emptied  # read first: gelujax.study.forms.DESIGN.run_names() order


CASES = {
  "intact": (AE, "--task=mnist_ae", lambda out: None),
  "summary_edited": (AE, "--task=mnist_ae", edit_summary),
  "selection_emptied": (AE, "--task=mnist_ae", empty_selection),
  "last_line_lost": (AE, "--task=mnist_ae", lose_last_line),
  "last_line_cut": (AE, "--task=mnist_ae", cut_last_line),
  "member_missing": (AE, "--task=mnist_ae", drop_member),
  "forms": (FORMS, "--task=gelu_forms", damage_forms),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
  """Each case: (how its render ended, the copy, the damaged file, the result's files before)."""
  root = tmp_path_factory.mktemp("render_faults")
  setups, command_lines, read_after = {}, [], []
  for name, (result, task, damage) in CASES.items():
    out = root / name / result.name
    shutil.copytree(result, out)
    damaged = damage(out)
    before = {f: (out / f).read_bytes() for f in RESULT_FILES}
    setups[name] = (out, damaged, before)
    command_lines.append([task, f"--out={out}", "--render"])
    read_after += [out / f for f in RESULT_FILES]
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
  ended = run_mains(REPO / "experiments" / "reproduce.py", command_lines, env, REPO, read_after)
  return {name: (e, *setups[name]) for name, e in zip(CASES, ended, strict=True)}


def result_files(ended, out):
  return {f: ended.files[out / f] for f in RESULT_FILES}


def test_an_intact_copy_renders(rendered):
  ended, out, _, _ = rendered["intact"]
  assert ended.code is None, (ended.code, ended.stderr[-2000:])
  assert "0.01055" in ended.files[out / "table.md"].decode()  # relu_eval's median, lr 1e-3


def test_a_value_edited_in_a_runs_summary_json_changes_nothing_rendered(rendered):
  """The render derives every value from metrics.jsonl: the edited summary.json's member does
  not move relu_eval's median (0.01055 -> 0.01019 were it read)."""
  intact, intact_out, _, _ = rendered["intact"]
  ended, out, _, _ = rendered["summary_edited"]
  assert ended.code is None, (ended.code, ended.stderr[-2000:])
  for name in ("table.md", "summary.json"):
    assert ended.files[out / name] == intact.files[intact_out / name], name
  assert "0.01019" not in ended.files[out / "table.md"].decode()


LAST_LINE = "holds 19 evaluations of member 5 (seed 5, lr 0.0001), up to epoch 19, where the"
EMPTY = "holds no record, where the finished run made 20 evaluations of each of its"


@pytest.mark.parametrize(
  ("case", "says"),
  [
    ("selection_emptied", f"{EMPTY} 6 members (1 an epoch for the 20 epochs"),
    ("last_line_lost", f"{LAST_LINE} finished run made 20 of each member"),
    ("last_line_cut", f"{LAST_LINE} finished run made 20 of each member"),
    ("member_missing", "holds 0 evaluations of member 1 (seed 1, lr 0.001), where the finished"),
    ("forms", f"{EMPTY} 30 members"),
  ],
)
def test_runs_whose_records_are_not_every_evaluation_are_refused_in_one_line(rendered, case, says):
  """Rendered before with the counts and values of the records left: exit 0, the table's
  medians from summary.json, "the median best epoch is 2 of 1"."""
  ended, out, damaged, before = rendered[case]
  assert isinstance(ended.code, str), (ended.code, ended.stderr[-2000:])
  assert ended.code.startswith(f"reproduce.py: error: {damaged} ") and "\n" not in ended.code
  assert says in ended.code
  assert "summary.json" in ended.code and "git checkout" in ended.code
  assert result_files(ended, out) == before  # the result is left as it was
