r"""Reproduces one of the paper's experiments end to end: selection grids -> selected lrs ->
evaluation seeds -> verdicts, tables, figures, README.

The work is `gelujax.study.reproduce` (and `gelujax.study.render`); this script reads its flags
and turns them into the values those take. Examples:

  python experiments/reproduce.py --task mnist --dataset fashion_mnist
  python experiments/reproduce.py --task mnist_noise --dataset fashion_mnist
  python experiments/reproduce.py --task twitter_pos   # downloads the ARK files on first use
  python experiments/reproduce.py --task mnist --dataset fashion_mnist --render
  python experiments/reproduce.py --task vit_fashion_mnist_pilot   # a study fixed in code
  python experiments/reproduce.py --task vit_fashion_mnist_study   # its numbers from its pilot

Finished runs are skipped and partial ones resume from their checkpoints; results go to
results/<dataset>/<task>/. --render trains nothing and rebuilds the result from the runs'
files alone.
"""

import functools
import sys
from pathlib import Path

from absl import app, flags, logging

from gelujax import host, study
from gelujax.cli import _flags
from gelujax.paper import (
  BASELINES,
  DEFAULT_ACTIVATIONS,
  EVALUATION_SEED_START,
  NOISE_SUFFIX,
  PAPER_TASKS,
  REFERENCES,
  defaults,
)
from gelujax.registry import parse_name
from gelujax.specs import get_activation
from gelujax.study import readme, registry


@functools.cache  # once a process
def define_flags() -> None:
  """The command's flags in absl's global flags, as `gelujax.cli.train.define_flags` defines
  train's: when the command runs, never when this module is imported."""
  global \
    _ACTIVATIONS, \
    _COMPILATION_CACHE, \
    _CPU_DEVICES, \
    _DATASET, \
    _DATA_DIR, \
    _DROPOUT_RATES, \
    _EMBEDDINGS, \
    _EPOCHS, \
    _EVALUATION_SEEDS, \
    _LEARNING_RATES, \
    _OUT, \
    _REFERENCE, \
    _RENDER, \
    _SEEDS, \
    _SETTINGS, \
    _TASK
  _TASK = flags.DEFINE_string(
    "task",
    None,
    f"The experiment: one of {', '.join(PAPER_TASKS)} (or any registered task), their "
    "settings from the flags below, or a study fixed in code, which only --out, --data_dir and "
    f"--render may change: {', '.join(registry.names(registry.FORMS))} (the GELU forms), "
    f"{', '.join(registry.names(registry.CONFIRM))} (§3.3's primary family re-tested on fresh "
    f"paired seeds), {', '.join(registry.names(registry.PILOT))} (the pilots: each "
    "feed-forward activation on selection seeds, validation metrics only) or "
    f"{', '.join(registry.names(registry.TRANSFORMER))} (the transformer studies, their lrs, "
    "margins and seeds from their pilot's committed result); each design's code path: "
    "gelujax.study.registry.STUDIES. A study of your own: 'module.path:VARIABLE', a literal of "
    "one of those designs' classes in your module (docs/reproducing.md, Adding a study).",
  )
  _DATASET = flags.DEFINE_string("dataset", None, "Dataset for the task (default: the task's own).")
  _ACTIVATIONS = flags.DEFINE_list(
    "activations", None, f"Activations, one run each; default: {','.join(DEFAULT_ACTIVATIONS)}."
  )
  _SEEDS = flags.DEFINE_list(
    "seeds",
    None,
    "The selection seeds of every grid: a count N (seeds 0..N-1) or a comma list ('7,' is the one "
    "seed 7); default: the task's count.",
  )
  _EVALUATION_SEEDS = flags.DEFINE_list(
    "evaluation_seeds",
    None,
    f"The seeds of the evaluation runs, trained at each run's candidate lrs (the selected one "
    f"and those its selection seeds cannot tell apart from it): a count N (seeds "
    f"{EVALUATION_SEED_START}..{EVALUATION_SEED_START}+N-1) or a comma list; none may be a "
    "selection seed; default: the task's (its design in gelujax.paper.PAPER).",
  )
  _LEARNING_RATES = flags.DEFINE_list(
    "learning_rates", None, "Learning rates; default: the task's."
  )
  _DROPOUT_RATES = flags.DEFINE_list(
    "dropout_rates", None, "Dropout rates, one run each; default: the paper's."
  )
  _EPOCHS = flags.DEFINE_integer(
    "epochs", None, "Training epochs; default: the task's (the paper's)."
  )
  _DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Folder with the dataset's files, the only place looked when given; "
    "default: a known local copy, TFDS, the cache, then a download (`gelujax data list` says "
    "where each set would be read from)."
  )  # fmt: skip
  _EMBEDDINGS = flags.DEFINE_string(
    "embeddings",
    None,
    "twitter_pos only: the pretrained word vectors file (one word + vector a line).",
  )
  _OUT = flags.DEFINE_string("out", None, "Output directory; default: results/<dataset>/<task>/.")
  _CPU_DEVICES = flags.DEFINE_string(
    "cpu_devices", "auto", "CPU hosts: the devices to split this host into, or 'auto' (see "
    "experiments/train.py --help)."
  )  # fmt: skip
  _COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", host.DEFAULT_CACHE, "Folder that keeps compiled programs between "
    "runs; 'none' disables it."
  )  # fmt: skip
  _REFERENCE = flags.DEFINE_list(
    "reference",
    None,
    f"The activations every other one is compared with, besides the baselines "
    f"({','.join(BASELINES)}), where trained in the same result: exploratory comparisons with "
    f"intervals, paired by seed; default: {','.join(REFERENCES)}. Also with --render.",
  )
  _RENDER = flags.DEFINE_bool(
    "render", False, "Train nothing: rebuild tables, figures and README from the runs in --out."
  )
  # The flags that set what is trained: --render reads all of it from the runs' files.
  _SETTINGS = (
    _ACTIVATIONS, _SEEDS, _EVALUATION_SEEDS, _LEARNING_RATES, _DROPOUT_RATES, _EPOCHS, _EMBEDDINGS
  )  # fmt: skip


def run() -> Path:
  """Turns the flags into values and reproduces (or renders) the task; ValueError on a bad
  value, before any work."""
  task = _TASK.value
  if not task:
    raise ValueError(f"--task is required: one of {', '.join(PAPER_TASKS)}.")
  text_flags = (
    _TASK, _DATASET, _ACTIVATIONS, _SEEDS, _EVALUATION_SEEDS, _LEARNING_RATES, _DROPOUT_RATES,
    _DATA_DIR, _EMBEDDINGS, _OUT, _CPU_DEVICES, _COMPILATION_CACHE, _REFERENCE,
  )  # fmt: skip
  _flags.check_utf8(**{flag.name: flag.value for flag in text_flags})
  not_empty = (_TASK, _DATASET, _OUT, _CPU_DEVICES)
  _flags.check_given_once(__name__, [flag.name for flag in not_empty])
  host.enable_compilation_cache(_COMPILATION_CACHE.value)
  root, project = _flags.working_folder()
  if task in registry.STUDIES or registry.is_users(task):
    return run_study(registry.resolve(task), root, project)
  references = parse_references(_REFERENCE.value)
  noise = task.endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  # The flags that set a field of each run's spec: the task's overrides may not set it too.
  per_run = {
    "activation": ("activations", _ACTIVATIONS.value),
    "dropout": ("dropout_rates", _DROPOUT_RATES.value),
    "learning_rates": ("learning_rates", _LEARNING_RATES.value),
    "seeds": ("seeds", _SEEDS.value),
  }
  _, spec = _flags.make_spec(
    base, per_run, dataset=_DATASET.value, epochs=_EPOCHS.value, embeddings=_EMBEDDINGS.value
  )
  # The registered task names the result, its hypotheses and the paper's numbers; field
  # overrides in --task (``twitter_pos(model=...)``) are the spec's, recorded in every run.
  name = parse_name(base)[0]
  task = name + (NOISE_SUFFIX if noise else "")
  out = Path(_OUT.value or root / "results" / spec.dataset / task)
  if _RENDER.value:
    given = [f"--{flag.name}" for flag in _SETTINGS if flag.value is not None]
    if given:
      raise ValueError(
        f"--render reads every setting from the runs' files in {out}; leave out "
        f"{', '.join(given)} (or --render, to train with them)."
      )
    return study.render(task, out=out, root=root, project=project, references=references)
  seeds = _flags.parse_seeds(_SEEDS.value, spec.seeds)
  default = defaults(task, spec, len(seeds))  # The one place the defaults are written.
  evaluation_seeds = _flags.parse_seeds(
    _EVALUATION_SEEDS.value, default.evaluation_seeds, "evaluation_seeds", EVALUATION_SEED_START
  )
  learning_rates = _flags.parse_floats(
    "learning_rates", _LEARNING_RATES.value, default.learning_rates
  )
  dropout_rates = _flags.parse_floats("dropout_rates", _DROPOUT_RATES.value, default.dropout_rates)
  if noise and dropout_rates != [0.0]:
    raise ValueError(
      f"--dropout_rates {','.join(_DROPOUT_RATES.value)} with --task {task}: the noise "
      "experiment evaluates the no-dropout classifiers only; leave --dropout_rates out."
    )
  activations = _flags.parse_names("activations", _ACTIVATIONS.value, default.activations)
  given = parse_name(base)[1]
  for field, values in (("activation", activations), ("dropout", dropout_rates)):
    if field in given and given[field] not in values:  # Each run's replaces it: never trained.
      flag = per_run[field][0]
      raise ValueError(
        f"--task {base!r} sets {field}={given[field]!r}, which no run trains: each run's "
        f"{field} is one of --{flag} (by default {','.join(map(str, values))}); give "
        f"--{flag}={given[field]} instead."
      )
  # Before a user's activation is checked: checking it runs JAX, which fixes the device count.
  host.configure_cpu(_CPU_DEVICES.value, len(learning_rates) * len(seeds))
  _flags.check_runs(
    spec, {"activation": ("activations", activations), "dropout": ("dropout_rates", dropout_rates)}
  )
  return study.reproduce(
    task,
    spec,
    out=out,
    root=root,
    project=project,
    activations=activations,
    dropout_rates=dropout_rates,
    learning_rates=learning_rates,
    seeds=seeds,
    evaluation_seeds=evaluation_seeds,
    data_dir=_DATA_DIR.value,
    references=references,
  )


def parse_references(values: list[str] | None) -> list[str]:
  """``--reference``'s activations (unset: `gelujax.paper.REFERENCES`), each one an activation
  gelujax or the user's module gives (imported as ``--activations`` would import it)."""
  references = _flags.parse_names("reference", values, REFERENCES)
  for name in references:
    try:
      get_activation(name)
    except ValueError as e:
      raise ValueError(
        f"--reference {name!r} is not an activation: {e} Give activations as --activations "
        "takes them (e.g. --reference=gelu,gelu_tanh)."
      ) from None
  return references


def run_study(study: registry.Study, root: Path, project: bool) -> Path:
  """A study fixed in code (`gelujax.study.registry.STUDIES`): its design fixes what it trains,
  so only where it runs can be chosen (``root`` and ``project``:
  `gelujax.cli._flags.working_folder`); the flags that would change it are refused before any
  work."""
  given = [
    f"--{flag.name}" for flag in (*_SETTINGS, _DATASET, _REFERENCE) if flag.value is not None
  ]
  if given:
    raise ValueError(
      f"--task {study.name} trains the design fixed in {study.where} before its runs "
      f"({study.kind.fixed(study.design)}); leave out {', '.join(given)}."
    )
  return registry.reproduce(
    study,
    out=Path(_OUT.value or root / "results" / study.design.dataset / study.name),
    root=root,
    data_dir=_DATA_DIR.value,
    train=not _RENDER.value,
    command=" ".join([readme.command_name(project), *sys.argv[1:]]),
    project=project,
    configure=lambda members: host.configure_cpu(_CPU_DEVICES.value, members),
  )


# The library's messages name a run's folder `workdir`; reproduce makes one per arm under --out
# and has no --workdir flag: advice to pass another workdir is advice to pass another --out.
WORKDIR_WORDS = (
  (r"(another|a shorter|a new|a) `workdir`", r"\1 --out"),
  (r"a new folder or this run's workdir", "another --out, or this result's --out to resume it"),
  (r"`workdir`", "the arm's run folder"),
)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  _flags.begin()
  host.unwind_on_signals()  # Ctrl-C and `kill` unwind alike, and are never lost.
  if not flags.FLAGS["verbosity"].present:  # Orbax logs every checkpoint step at INFO.
    logging.set_verbosity(logging.WARNING)
  try:
    with host.repairing_compilation_cache():
      out = run()
    host.raise_if_interrupted()  # a kill whose exception a finalizer swallowed: not a success
  # Ctrl-C or kill, a refused value (a diverged run is reported in the table), a damaged cache.
  except (KeyboardInterrupt, Exception) as e:
    _flags.exit_stopped(_flags.program_name(argv), e, words=WORKDIR_WORDS)
  print(f"Wrote {out}/README.md, table.md, summary.json and figures.", flush=True)


def run_command(program: str | None = None) -> None:
  """``gelujax reproduce`` with ``sys.argv``'s flags, named ``program``
  (`gelujax.cli._flags.run`)."""
  define_flags()
  _flags.run(sys.modules[__name__], program)
