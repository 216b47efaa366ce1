"""Tests for experiments/reproduce.py (``gelujax reproduce``): its flags, a reproduction end to
end with the real trainer on MNIST-format files (selection grid -> evaluation seeds -> noise
evaluation), and one run from a user's folder."""

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from run_mains import run_mains

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent


def write_idx(path, array):
  """An uncompressed IDX file: zero, zero, dtype 0x08 (ubyte), rank, big-endian dims, data."""
  array = np.asarray(array, np.uint8)
  header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
    int(d).to_bytes(4, "big") for d in array.shape
  )
  path.write_bytes(header + array.tobytes())


def write_tiny_mnist(folder, n_train, n_test):
  """MNIST-format files whose class is the brightness of one 7x7 block (learnable fast)."""
  rng = np.random.default_rng(0)
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 60, (n, 28, 28))
    for i, label in enumerate(labels):
      row, col = divmod(int(label), 4)
      images[i, 7 * row : 7 * row + 7, 7 * col : 7 * col + 7] += 190
    write_idx(folder / f"{prefix}-images-idx3-ubyte", images)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)


BAD_FLAGS = [
  ("--task=no_such", "no_such"),
  ("--activations=gelu,swish", "--activations 'swish' is not valid for task 'tiny_mnist'"),
  ("--dropout_rates=0,1.5", "--dropout_rates 1.5 is not valid for task 'tiny_mnist'"),
  ("--dataset=cifar10", "--dataset 'cifar10' is not valid for task 'tiny_mnist'"),
  ("--seeds=0", "--seeds '0' is a count"),
  ("--render", "--render: "),
  ("--evaluation_seeds=1,5", "--evaluation_seeds 1,5 shares [1] with --seeds"),
  # How Python hands over the byte 0xff of a command line: refused like every other flag.
  ("--data_dir=fm-\udcff", "--data_dir b'fm-\\xff' is not UTF-8 (byte 0xff at position 3)"),
  # Each was taken without a word: a repeat as one run, an empty list as the default, the
  # later of two keywords, a flag over the task's own override, a task's field no run trains.
  ("--activations=gelu,gelu", "--activations 'gelu,gelu' repeats 'gelu'; give each value once."),
  ("--dropout_rates=0,0.0", "--dropout_rates '0,0.0' repeats 0.0; give each value once."),
  ("--evaluation_seeds=9,9", "--evaluation_seeds '9,9' repeats 9; give each value once."),
  ("--learning_rates=", "--learning_rates is given empty; give one or more numbers"),
  ("--seeds=", "--seeds is given empty; give a count (e.g. 5) or a comma list of seeds"),
  ("--activations=", "--activations is given empty; give one or more names (e.g. gelu,relu)"),
  ("--evaluation_seeds=", "--evaluation_seeds is given empty; give a count (e.g. 5)"),
  (
    "--epochs=1000000000",
    "--epochs 1000000000 is not valid for task 'tiny_mnist': expected an integer from 1 to "
    "100,000 (a bound against mistyped counts",
  ),
  (
    "--task=tiny_mnist(epochs=1, epochs=2)",
    "--task 'tiny_mnist(epochs=1, epochs=2)' cannot be parsed: keyword 'epochs' is given "
    "twice; give each once.",
  ),
  (
    "--task=tiny_mnist(epochs=1, learning_rates=(0.1,)) --epochs=2 --learning_rates=0.01",
    "--task 'tiny_mnist(epochs=1, learning_rates=(0.1,))' sets epochs=1 and learning_rates=(0.1,), "
    "and --epochs 2 and --learning_rates '0.01' set them again; set each field once, in --task "
    "or by its flag.",
  ),
  (
    "--task=tiny_mnist(activation='gelu_fast')",
    "--task \"tiny_mnist(activation='gelu_fast')\" sets activation='gelu_fast', which no run "
    "trains: each run's activation is one of --activations (by default gelu,gelu_tanh,relu,elu,"
    "silu); give --activations=gelu_fast instead.",
  ),
  (
    "--reference=gelu,swish",
    "--reference 'swish' is not an activation: Unknown activation 'swish'. Known activations: ",
  ),
  ("--reference=", "--reference is given empty; give one or more names (e.g. gelu,relu)"),
  # Refused before JAX is given the folder (the last line: were it given, it would stay given).
  ("--compilation_cache=c-\udcff", "--compilation_cache b'c-\\xff' is not UTF-8 (byte 0xff at"),
]


# An arm's run folder that is a file: refused in the process of BAD_FLAGS, after them.
ARM_IS_A_FILE = "an arm's run folder that is a file"


@pytest.fixture(scope="module")
def bad_flag_exits(tmp_path_factory):
  """How reproduce.py's main ended for each of BAD_FLAGS (all in one fresh process), and the
  --out folder each was given; under ARM_IS_A_FILE, the same for a command whose arm's run
  folder is a file, run last in that process (with data to read)."""
  root = tmp_path_factory.mktemp("bad_flags")
  outs = [root / str(i) / "out" for i in range(len(BAD_FLAGS))]
  command_lines = []
  for (flags, _), out in zip(BAD_FLAGS, outs, strict=True):
    first, *more = flags.split(" --")  # an entry may hold several flags
    args = [first, *(f"--{flag}" for flag in more), f"--out={out}"]
    command_lines.append(args if first.startswith("--task") else ["--task=tiny_mnist", *args])
  (root / "mnist").mkdir()
  write_tiny_mnist(root / "mnist", 60, 20)
  arm_out = root / "arm" / "out"
  (arm_out / "runs").mkdir(parents=True)
  (arm_out / "runs" / "gelu").write_text("a file where the arm's folder goes")
  command_lines.append(
    ["--task=tiny_mnist(data_options={'validation_size': 10})", "--activations=gelu",
     f"--data_dir={root / 'mnist'}", f"--out={arm_out}", "--seeds=1", "--evaluation_seeds=1",
     "--epochs=1"]
  )  # fmt: skip
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
  ended = run_mains(REPO / "experiments" / "reproduce.py", command_lines, env, REPO)
  names = [flag for flag, _ in BAD_FLAGS] + [ARM_IS_A_FILE]
  return dict(zip(names, zip(ended, [*outs, arm_out], strict=True), strict=True))


@pytest.mark.parametrize(("flag", "message"), BAD_FLAGS)
def test_bad_flags_fail_in_one_line_and_write_nothing(bad_flag_exits, flag, message):
  ended, out = bad_flag_exits[flag]
  code = ended.code
  # sys.exit with a message: Python prints it and a newline to stderr and exits with status 1.
  assert isinstance(code, str) and ended.stderr == ""
  assert code.startswith("reproduce.py: error: ") and "\n" not in code
  assert message in code
  assert not out.exists()


def test_refusals_of_an_arms_folder_name_reproduces_flags(bad_flag_exits):
  """The library names a run's folder `workdir`; reproduce has no --workdir flag, so its
  advice is in its own words: the arm's run folder, and another --out."""
  ended, out = bad_flag_exits[ARM_IS_A_FILE]
  code = ended.code
  assert isinstance(code, str) and code.startswith("reproduce.py: error: "), ended
  assert f"the arm's run folder {out}/runs/gelu is a file" in code, code
  assert "pass another --out" in code and "workdir" not in code, code
  assert (out / "runs" / "gelu").read_text() == "a file where the arm's folder goes"


def read_metrics(workdir):
  return (workdir / "metrics.jsonl").read_text().splitlines()


def member_pairs(workdir):
  return [
    (m["learning_rate"], m["seed"])
    for m in json.loads((workdir / "config.json").read_text())["members"]
  ]


@pytest.mark.slow
def test_tiny_mnist_end_to_end_evaluation_seeds_and_noise(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  # The MNIST loader keeps the first 5,000 train images for validation.
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  out = tmp_path / "results" / "tiny_mnist"
  noise_out = tmp_path / "results" / "tiny_mnist_noise"
  workdir, evaluation = out / "runs" / "gelu", out / "runs" / "gelu_eval"
  flags = [
    "--task=tiny_mnist",
    f"--data_dir={data}",
    "--activations=gelu",
    "--seeds=2",
    "--learning_rates=3e-3,1e-3",
  ]
  relu_flags = [f if f != "--activations=gelu" else "--activations=relu" for f in flags]
  # The invocations a user makes one after another, each reading what the ones before wrote,
  # in one process (see run_mains); the files they change are read after each.
  invocations = [
    [*flags, f"--out={out}"],
    [*flags, f"--out={out}"],
    ["--task=tiny_mnist", f"--out={out}", "--render"],
    [*relu_flags, f"--out={out}"],
    ["--task=tiny_mnist", f"--out={out}", "--render"],
    [*flags[1:], f"--out={noise_out}", "--task=tiny_mnist_noise"],
    ["--task=tiny_mnist_noise", f"--out={noise_out}", "--render"],
  ]
  changing = [
    workdir / "metrics.jsonl", evaluation / "metrics.jsonl", out / "table.md",
    out / "summary.json", out / "README.md", out / "loss_curves.png", noise_out / "table.md",
  ]  # fmt: skip
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    # This checkout's gelujax, whichever checkout the package is installed from.
    "PYTHONPATH": str(REPO),
    # Later invocations re-use the compilations of earlier ones.
    "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"),
  }
  ended = run_mains(REPO / "experiments" / "reproduce.py", invocations, env, REPO, changing)
  for call in ended:
    assert call.code is None, (call.code, call.stderr[-3000:])
  first, again, render, relu, relu_render, noise, noise_render = ended

  # The selection grid, then its evaluation runs: at the selected lr, and at the other lr,
  # which 2 selection seeds cannot tell apart from it (the smallest rank-sum p with 2 a side is
  # 1/3): a candidate.
  stdout = first.stdout
  assert "[1/1] gelu: trained in" in stdout and "[1/2] gelu_eval: trained in" in stdout
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 2
  assert member_pairs(workdir) == [(3e-3, 0), (3e-3, 1), (1e-3, 0), (1e-3, 1)]
  # The lr with the lower median best validation loss, selected on seeds 0 and 1; the
  # evaluation run trains tiny_mnist's default evaluation seeds, 100 and 101, at it alone.
  best = {
    lr: np.median(
      [m["best"]["validation_loss"] for m in summary["members"] if m["learning_rate"] == lr]
    )
    for lr in (3e-3, 1e-3)
  }
  selected = min(best, key=best.get)
  other = 1e-3 if selected == 3e-3 else 3e-3
  assert member_pairs(evaluation) == [(selected, 100), (selected, 101)]
  candidate = out / "runs" / f"gelu_eval_lr{other:g}"
  assert f"[2/2] gelu_eval_lr{other:g}: trained in" in stdout
  assert member_pairs(candidate) == [(other, 100), (other, 101)]
  evaluated = json.loads((evaluation / "summary.json").read_text())
  errors = [m["best"]["test_error"] for m in evaluated["members"]]
  result = json.loads(first.files[out / "summary.json"])
  assert result["rows"][0]["selected"]["learning_rate"] == selected
  row = result["evaluation_rows"]["gelu_eval"]
  assert row["selected"]["metrics"]["best.test_error"]["median"] == pytest.approx(np.median(errors))
  table = first.files[out / "table.md"].decode()
  assert f"| gelu | {selected:g} | 0, 1 | 0/2 |" in table
  assert f"| gelu_eval | {selected:g} | 100, 101 | 0/2 |" in table
  assert f"| gelu_eval_lr{other:g} | {other:g} | 100, 101 | 0/2 |" in table
  assert result["candidates"][0]["lrs"][1]["candidate"] is True
  readme = first.files[out / "README.md"].decode()
  # The command that reproduces it, from the runs' files (the data directory is the machine's;
  # 2 seeds and evaluation seeds 100, 101 are tiny_mnist's defaults).
  assert (
    "python experiments/reproduce.py --task=tiny_mnist --activations=gelu "
    f"--learning_rates=0.003,0.001 --out={out}" in readme
  )
  assert "- Selection seeds (the grids'): 0, 1" in readme
  assert (
    "- Evaluation seeds: 100, 101 (`runs/<run>_eval/`, and `runs/<run>_eval_lr<lr>/` at another "
    "candidate lr)" in readme
  )
  assert f"- Candidates [gelu]: lr {selected:g} (selected), lr {other:g} (p = " in readme
  # No claim to open with: the README opens with its tables, and its method says why.
  assert readme.split("\n## ")[1].startswith("Tables\n")
  method = readme.split("\n## How the verdicts are reached\n\n", 1)[1]
  assert method.startswith(
    "None: the paper states no claim for this task. Every comparison above is exploratory.\n"
  )
  assert len(first.files[out / "loss_curves.png"]) > 10_000

  # Invoked again, it trains nothing and changes no metrics; so does --render, on its own.
  assert "[1/1] gelu: finished earlier: skipped" in again.stdout
  assert "[1/2] gelu_eval: finished earlier: skipped" in again.stdout
  assert f"[2/2] gelu_eval_lr{other:g}: finished earlier: skipped" in again.stdout
  assert "trained in" not in again.stdout
  assert "[1/1]" not in render.stdout and render.files[out / "table.md"].decode() == table
  metrics = [workdir / "metrics.jsonl", evaluation / "metrics.jsonl"]
  for call in (again, render):
    assert [call.files[f] for f in metrics] == [first.files[f] for f in metrics]

  # A later invocation for another activation trains only its runs, and its result covers every
  # run under --out, as a --render does (not only the runs it was asked for).
  assert "[1/1] relu: trained in" in relu.stdout and "gelu" not in relu.stdout.split("Wrote")[0]
  both = relu.files[out / "table.md"].decode()
  assert "| gelu | " in both and "| relu | " in both and "| gelu_eval | " in both
  assert relu_render.files[out / "table.md"].decode() == both

  # The noise experiment re-uses the finished no-dropout classifiers beside it.
  assert "[1/1] gelu: finished earlier: skipped" in noise.stdout
  assert "[1/2] gelu_eval: finished earlier: skipped" in noise.stdout
  assert f"[2/2] gelu_eval_lr{other:g}: finished earlier: skipped" in noise.stdout
  assert not (noise_out / "runs").exists()
  result = json.loads((noise_out / "noise" / f"gelu_eval_lr{selected:g}.json").read_text())
  assert (result["learning_rate"], result["seeds"]) == (selected, [100, 101])
  assert result["levels"] == pytest.approx(np.linspace(0, 3, 20))
  accuracy = np.asarray(result["accuracy"])
  # At a = 0 the evaluation is the plain test evaluation of the final checkpoint.
  final_errors = [m["final"]["test_error"] for m in evaluated["members"]]
  np.testing.assert_allclose(accuracy[:, 0], 1 - np.asarray(final_errors), atol=1e-6)
  # Pixel noise of half-width 3 swamps this data's signal (a block 0.75 brighter).
  assert np.all(accuracy[:, -1] < accuracy[:, 0])
  # The selection grid's classifiers, at the selected lr, are evaluated too (exploratory).
  kept = json.loads((noise_out / "noise" / f"gelu_lr{selected:g}.json").read_text())
  assert kept["seeds"] == [0, 1]
  noise_table = noise.files[noise_out / "table.md"].decode()
  assert f"| gelu_eval | {selected:g} | 100, 101 | 0/2 |" in noise_table
  # The other candidate's classifiers are evaluated under noise too, and shown.
  assert (noise_out / "noise" / f"gelu_eval_lr{other:g}_lr{other:g}.json").exists()
  assert f"| gelu_eval_lr{other:g} | {other:g} | 100, 101 | 0/2 |" in noise_table
  assert (noise_out / "noise_robustness.png").stat().st_size > 10_000
  # Re-rendered from noise/*.json and the classifiers' files alone.
  assert noise_render.files[noise_out / "table.md"].decode() == noise_table


MYACTS = """
import jax.numpy as jnp


def squareplus(x, b=4.0):
  return 0.5 * (x + jnp.sqrt(x * x + b))
"""


def checkout_state():
  """What a run must leave as it found it in the checkout: ``git status`` (which may list other
  changes; the same after as before), and the README the project's results rewrite."""
  status = subprocess.run(
    ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
    capture_output=True, text=True, check=True,
  )  # fmt: skip
  return status.stdout, (REPO / "README.md").read_bytes()


# How pip's console script runs ``gelujax``: its own folder, not the folder it runs in, first on
# the path.
CONSOLE_SCRIPT = """
import re
import sys
from gelujax.cli import main
if __name__ == "__main__":
  sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
  sys.exit(main())
"""


def best_values(workdir, key, select="validation_loss"):
  """seed -> ``key`` at each member's evaluation of lowest ``select``, from metrics.jsonl."""
  records = [json.loads(line) for line in read_metrics(workdir)]
  found = {}
  for seed in dict.fromkeys(r["seed"] for r in records):
    mine = [r for r in records if r["seed"] == seed]
    found[seed] = mine[int(np.argmin([r[select] for r in mine]))][key]
  return found


@pytest.mark.slow
def test_run_from_a_users_folder_it_writes_there_alone_and_says_how_to_run_it_again(tmp_path):
  """From a folder of the user's own, reproduce.py wrote into the checkout's results/ and
  rewrote the checkout's README (issue 41). Its result goes under the folder it runs in; it
  compares the user's activation with gelu, paired by seed, with intervals; its README opens
  with the tables; it names the user's activation by its file and the folder it was imported
  from; and the commands its README gives run from that folder with the installed command (a
  console script, whose own folder is first on the path)."""
  mine, data = tmp_path / "mine", tmp_path / "data"
  mine.mkdir()
  data.mkdir()
  (mine / "myacts.py").write_text(MYACTS)
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
  before = checkout_state()
  # The command, with 6 evaluation seeds: the fewest pairs with a finite exact interval.
  flags = ["--task=tiny_mnist", "--dataset=fashion_mnist", "--activations=gelu,myacts:squareplus",
           "--epochs=2", "--evaluation_seeds=6", f"--data_dir={data}",
           "--compilation_cache=none"]  # fmt: skip
  result = subprocess.run(
    [sys.executable, str(REPO / "experiments" / "reproduce.py"), *flags],
    cwd=mine, env=env, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  assert checkout_state() == before
  assert sorted(os.listdir(tmp_path)) == ["data", "mine"]
  assert set(os.listdir(mine)) <= {"myacts.py", "__pycache__", "results"}
  out = mine / "results" / "fashion_mnist" / "tiny_mnist"
  assert result.stdout.splitlines()[-1].startswith(f"Wrote {out}/README.md")
  summary = json.loads((out / "summary.json").read_text())
  assert summary["settings"]["activation_sources"] == {
    "myacts:squareplus": {
      "module": "myacts", "function": "squareplus", "file": str(mine / "myacts.py"),
      "sha256": hashlib.sha256((mine / "myacts.py").read_bytes()).hexdigest(),
      "folder": str(mine),
    }
  }  # fmt: skip
  # squareplus against gelu, the comparison the user ran the protocol for: on the evaluation
  # seeds, unpaired and seed by seed, each with a finite interval.
  (against,) = [
    e for e in summary["exploratory"]
    if (e["run"], e["baseline"], e["metric"]) == ("myacts_squareplus", "gelu", "best.test_error")
  ]  # fmt: skip
  assert against["seeds"] == "evaluation seeds"
  runs = out / "runs"
  a = best_values(runs / "myacts_squareplus_eval", "test_error")
  b = best_values(runs / "gelu_eval", "test_error")
  assert sorted(a) == sorted(b) == list(range(100, 106))
  paired = against["paired"]
  assert paired["seeds"] == list(range(100, 106))
  d = [a[seed] - b[seed] for seed in paired["seeds"]]
  assert paired["differences"] == pytest.approx(d, abs=1e-12)
  walsh = [(d[i] + d[j]) / 2 for i in range(6) for j in range(i, 6)]
  assert paired["shift"] == pytest.approx(float(np.median(walsh)), abs=1e-12)
  assert (paired["low"], paired["high"]) == pytest.approx((min(d), max(d)), abs=1e-12)
  unpaired = against["comparison"]
  assert unpaired["median_a"] == pytest.approx(float(np.median(list(a.values()))), abs=1e-12)
  assert unpaired["median_b"] == pytest.approx(float(np.median(list(b.values()))), abs=1e-12)
  assert np.isfinite([unpaired["low"], unpaired["high"]]).all()
  readme = (out / "README.md").read_text()
  lines = readme.splitlines()
  # What was found first: the title, then the tables (no claim of the paper's to open with).
  assert lines[1:3] == ["", "## Tables"]
  (row,) = [
    line for line in lines
    if line.startswith("| selected lr | test error (%) | myacts_squareplus | gelu | ")
  ]  # fmt: skip
  cells = [c.strip() for c in row.split("|")[1:-1]]
  assert cells[4] == "evaluation seeds" and cells[9] == "6"
  for cell in (cells[7], cells[10]):  # unpaired, then paired: a shift [low, high], all finite
    shift, low, high = map(float, re.fullmatch(r"(\S+) \[(\S+), (\S+)\]", cell).groups())
    assert low <= shift <= high and np.isfinite([low, high]).all()
  assert f"From scratch (from `{mine}`, the folder it was run in; finished runs" in readme
  # Each of the activation's runs records it; the README lists it with the paper's, and says
  # its comparisons are exploratory and how to make them confirmatory.
  for run in ("myacts_squareplus", "myacts_squareplus_eval"):
    config = json.loads((runs / run / "config.json").read_text())
    assert config["activation"] == "myacts:squareplus"
    assert config["activation_source"]["function"] == "squareplus"
  assert "- Activations: gelu, myacts:squareplus" in readme
  assert "| myacts_squareplus_eval | 0.001 |" in readme
  assert "no correction, no verdict. To make a comparison of your own activation confirmatory, " \
    "pre-register it" in readme  # fmt: skip
  assert "run by `gelujax reproduce --task=my_studies:MINE`" in readme
  assert (
    f"- Activation myacts:squareplus: `squareplus` of `{mine / 'myacts.py'}` (sha256 "
    f"{hashlib.sha256((mine / 'myacts.py').read_bytes()).hexdigest()}), imported from the "
    f"folder `{mine}` (the commands above import it from there" in readme
  )
  commands = [line for line in readme.splitlines() if line.startswith("gelujax reproduce ")]
  assert commands == [
    "gelujax reproduce --task=tiny_mnist --dataset=fashion_mnist "
    "--activations=gelu,myacts:squareplus --evaluation_seeds=100,101,102,103,104,105,",
    "gelujax reproduce --task=tiny_mnist --dataset=fashion_mnist --render",
  ]
  # Each runs from the folder with the installed command (the data folder is this machine's:
  # not in the command), finds everything finished or rendered there, and imports the user's
  # module from it.
  script = tmp_path / "bin" / "gelujax"
  script.parent.mkdir()
  script.write_text(CONSOLE_SCRIPT)
  machine = [f"--data_dir={data}", "--compilation_cache=none"]
  stdouts = []
  for command, more in zip(commands, (machine, []), strict=True):
    again = subprocess.run(
      [sys.executable, str(script), *shlex.split(command)[1:], *more],
      cwd=mine, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, (command, again.stderr[-3000:])
    assert "trained in" not in again.stdout
    assert again.stdout.splitlines()[-1].startswith(f"Wrote {out}/README.md")
    stdouts.append(again.stdout)
  assert "[2/2] myacts_squareplus: finished earlier: skipped" in stdouts[0]
  assert checkout_state() == before
  assert json.loads((out / "summary.json").read_text()) == summary


def test_the_vit_reproduces_a_gated_unit_against_gelu_on_idx_files(tmp_path):
  """`reproduce.py` with a transformer task (vit_fashion_mnist, narrowed to `vit_tiny`) on
  Fashion-MNIST files in the IDX format: gelu and geglu (its blocks' gated feed-forward) each
  train their selection grid and their evaluation seeds, and geglu is compared with gelu paired
  by seed; each recorded test error is the share of the 64 test images the restored network's
  logits get wrong, counted here. One lr: selecting among lrs and training the candidates' runs
  is the task's no more than any other's, and
  `test_tiny_mnist_end_to_end_evaluation_seeds_and_noise` asserts it."""
  from tiny_task import write_mnist_files, wrong_share_bounds

  from gelujax import engine, tasks
  from gelujax import workdir as workdirs

  data = tmp_path / "data"
  write_mnist_files(str(data), num_train=256, num_test=64)
  out = tmp_path / "out"
  task = "vit_fashion_mnist(model='vit_tiny', data_options={'validation_size': 32})"
  result = subprocess.run(
    [sys.executable, str(REPO / "experiments" / "reproduce.py"), f"--task={task}",
     f"--data_dir={data}", "--activations=gelu,geglu", "--seeds=2", "--evaluation_seeds=2",
     "--learning_rates=1e-3", "--epochs=1", f"--out={out}"],
    env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}, cwd=tmp_path,
    capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  # Each arm's selection grid and its evaluation run.
  assert {p.name for p in (out / "runs").iterdir()} == {"gelu", "geglu", "gelu_eval", "geglu_eval"}
  summary = json.loads((out / "summary.json").read_text())
  compared = {(e["run"], e["baseline"], e["metric"]) for e in summary["exploratory"]}
  assert ("geglu", "gelu", "best.test_error") in compared
  for arm in ("gelu", "geglu"):
    workdir = str(out / "runs" / f"{arm}_eval")
    config = workdirs.read_json(os.path.join(workdir, "config.json"))
    assert (config["task"], config["activation"]) == ("vit_fashion_mnist", arm)
    assert [m["seed"] for m in config["members"]] == [100, 101]
    spec = tasks.read_task(workdir)
    splits = spec.load_data(str(data))
    parts = tasks.build(spec, splits)
    _, state = engine.restore(parts, workdir)
    hidden = state.params["encoder"]["block_0"]["mlp"]["hidden"]["kernel"]
    assert hidden.shape[-1] == (2 * 21 if arm == "geglu" else 32)  # gated at the plain count
    logits = engine.predict_members(parts, state, splits["test"])
    # Evaluation and prediction are two programs: a near-tie may rank either way in one of them.
    fewest, most = wrong_share_bounds(logits, splits["test"]["targets"])
    recorded = np.array([r["test_error"] for r in workdirs.read_metrics(workdir)])
    assert np.all(fewest - 1e-12 <= recorded) and np.all(recorded <= most + 1e-12)
