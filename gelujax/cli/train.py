r"""Trains one task's grid of learning rates x seeds with gelujax.

The task (tasks.get) supplies the paper's settings; flags override them. Examples:

  python experiments/train.py --task=mnist --activation=gelu_tanh --epochs=50
  python experiments/train.py --task=mnist --learning_rates=1e-3,1e-4 --seeds=0,1,2

Re-running a command with the same --workdir resumes it (a larger --epochs continues it).
A multi-host run starts the same command on every host with --coordinator_address (host:port
of process 0), --num_processes and that host's --process_id.
"""

import functools
import sys

import jax
from absl import app, flags, logging

from gelujax import engine, host, optimizers, tasks
from gelujax import workdir as workdirs
from gelujax.cli import _flags
from gelujax.members import Members
from gelujax.models.user import is_user_model


@functools.cache  # once a process
def define_flags() -> None:
  """Defines the command's flags in absl's global flags, once a process: when the command
  runs (or a script that runs it is imported), never when this module is imported, so that
  importing every module of gelujax (documentation tools, a user's script) defines none
  and the two commands' flags of one name never meet."""
  global \
    _ACTIVATION, \
    _BATCH_SIZE, \
    _CHECKPOINT_EVERY, \
    _COMPILATION_CACHE, \
    _COORDINATOR, \
    _CPU_DEVICES, \
    _DATASET, \
    _DATA_DIR, \
    _DROPOUT, \
    _DTYPE, \
    _EPOCHS, \
    _LEARNING_RATES, \
    _MEMBERS_AXIS, \
    _MEMBER_STRATEGY, \
    _NUM_PROCESSES, \
    _PROCESS_ID, \
    _SEEDS, \
    _SPEC_FLAGS, \
    _TASK, \
    _WORKDIR
  _TASK = flags.DEFINE_string(
    "task", None, "The experiment, one of gelujax.tasks.task_names(), optionally with field "
    "overrides, e.g. 'mnist(evals_per_epoch=5)'."
  )  # fmt: skip
  _ACTIVATION = flags.DEFINE_string(
    "activation", None, "Activation spec, e.g. gelu or 'gaussian_gelu(sigma=0.5)'; "
    "default: the task's (gelu_tanh, as in the paper)."
  )  # fmt: skip
  _DATASET = flags.DEFINE_string(
    "dataset", None, "Dataset, one of the task's compatible datasets; default: the task's."
  )
  _DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Folder with the dataset's files, the only place looked when given; "
    "default: a known local copy, TFDS, the cache, then a download (`gelujax data list` says "
    "where each set would be read from)."
  )  # fmt: skip
  _WORKDIR = flags.DEFINE_string(
    "workdir",
    None,
    "Where the run's files go; default: workdirs/<task>_<dataset>_<activation>, "
    "with _<model> for a model of your own (module:Class).",
  )
  _EPOCHS = flags.DEFINE_integer(
    "epochs", None, "Epochs to train (1 to 100,000); default: the task's."
  )
  _BATCH_SIZE = flags.DEFINE_integer(
    "batch_size", None, "Global batch size, a multiple of the devices on the mesh's data axis; "
    "default: the task's."
  )  # fmt: skip
  _LEARNING_RATES = flags.DEFINE_list(
    "learning_rates", None, "Comma list of learning rates (> 0); default: the task's grid."
  )
  _SEEDS = flags.DEFINE_list(
    "seeds", None, "A count N (seeds 0..N-1) or a comma list of seeds ('7,' is the one seed 7); "
    "default: the task's count."
  )  # fmt: skip
  _DROPOUT = flags.DEFINE_float(
    "dropout", None, "Dropout drop rate in [0, 1); 0 disables it; default: the task's."
  )
  _DTYPE = flags.DEFINE_string(
    "dtype", None, "What the model's layers and activations compute in: float32 or bfloat16 "
    "(mixed precision: parameters, optimizer state, losses and metrics stay float32); default: "
    "the task's (float32)."
  )  # fmt: skip
  _CHECKPOINT_EVERY = flags.DEFINE_integer(
    "checkpoint_every", 1, "Save a checkpoint every N epochs."
  )
  _CPU_DEVICES = flags.DEFINE_string(
    "cpu_devices", "auto", "CPU hosts: the devices to split this host into, or 'auto' (one per "
    "core for a grid, one using every core for a single member; see gelujax.host)."
  )  # fmt: skip
  _MEMBERS_AXIS = flags.DEFINE_integer(
    "members_axis", None, "Devices along the mesh's members axis (a divisor of the device count; "
    "the rest split each batch); default: every device when the grid has as many members."
  )  # fmt: skip
  _MEMBER_STRATEGY = flags.DEFINE_enum(
    "member_strategy", "auto", ["auto", "vmap", "map"], "How a device takes the members it holds: "
    "vmap (batched into one computation), map (one after another in the same program), or auto "
    "(the measured rule, gelujax.engine.mesh.RULE: on a GPU map for convolutional models and vmap "
    "for others, on a CPU map; a resume keeps the strategy its run began with)."
  )  # fmt: skip
  _COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", host.DEFAULT_CACHE, "Folder that keeps compiled programs between runs "
    "(a re-run or resume does not compile again); 'none' disables it."
  )  # fmt: skip
  _COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "Multi-host runs: host:port of process 0 (unset: one process)."
  )
  _NUM_PROCESSES = flags.DEFINE_integer("num_processes", 1, "Multi-host runs: how many processes.")
  _PROCESS_ID = flags.DEFINE_integer("process_id", 0, "Multi-host runs: this process's index.")

  # The flags that set a field of the task's spec, each of its own name.
  _SPEC_FLAGS = (_ACTIVATION, _DATASET, _EPOCHS, _BATCH_SIZE, _DROPOUT, _DTYPE)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}.")
  _flags.begin()
  if not flags.FLAGS["verbosity"].present:  # Orbax logs every save at INFO.
    logging.set_verbosity(logging.WARNING)
  host.unwind_on_signals()  # Ctrl-C and `kill` unwind alike, and are never lost.
  try:
    text_flags = (
      _TASK, _ACTIVATION, _DATASET, _DTYPE, _LEARNING_RATES, _SEEDS, _CPU_DEVICES, _COORDINATOR,
      _DATA_DIR, _COMPILATION_CACHE,
    )  # fmt: skip
    _flags.check_utf8(**{flag.name: flag.value for flag in text_flags})
    not_empty = (_TASK, _ACTIVATION, _DATASET, _WORKDIR, _DTYPE, _CPU_DEVICES)
    _flags.check_given_once(__name__, [flag.name for flag in not_empty])
    # Before JAX starts (checking a user's activation runs it): how the host is split into
    # devices, for the grid's size as the flags and the registered task give it.
    host.configure_cpu(
      _CPU_DEVICES.value, _flags.member_count(_TASK.value, _LEARNING_RATES.value, _SEEDS.value)
    )
    # Each value parsed once, here; the library takes values (a TaskSpec, Members).
    _, spec = _flags.make_spec(
      _TASK.value,
      {flag.name: (flag.name, flag.value) for flag in (_LEARNING_RATES, _SEEDS)},
      **{flag.name: flag.value for flag in _SPEC_FLAGS},
    )
    members = Members(
      _flags.parse_floats("learning_rates", _LEARNING_RATES.value, spec.learning_rates),
      _flags.parse_seeds(_SEEDS.value, spec.seeds),
    )
    # Where compiled programs go.
    host.enable_compilation_cache(_COMPILATION_CACHE.value)
    if _COORDINATOR.value:
      host.initialize_distributed(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
    default = f"{spec.name}_{spec.dataset}_{spec.activation}"
    default += f"_{spec.dtype}" if spec.dtype != "float32" else ""
    default += f"_{spec.model}" if is_user_model(spec.model) else ""  # not a preset's folder
    name = workdirs.folder_name(default)  # As reproduce.py names its run folders.
    workdir = _WORKDIR.value or f"workdirs/{name}"
    run = dict(
      checkpoint_every=_CHECKPOINT_EVERY.value,
      members_axis=_MEMBERS_AXIS.value,
      member_strategy=_MEMBER_STRATEGY.value,
    )
    # Every refusal the settings alone decide comes before the data are read (or downloaded).
    engine.check_fit(
      tasks.record(spec),
      workdir,
      members,
      epochs=spec.epochs,
      batch_size=spec.batch_size,
      extendable=optimizers.extendable(spec.optimizer),
      **run,
    )
    with host.repairing_compilation_cache():
      parts = tasks.build(spec, spec.load_data(_DATA_DIR.value))
      summary = engine.fit(parts, workdir, members, **run)
    host.raise_if_interrupted()  # a kill whose exception a finalizer swallowed: not a success
  except (KeyboardInterrupt, Exception) as e:  # Ctrl-C or kill, a refused value, a damaged cache.
    _flags.exit_stopped(_flags.program_name(argv), e, refused=(ValueError, engine.DivergedError))
  if jax.process_index() == 0:
    print(closing_line(workdir, summary, parts.select_metric), flush=True)


def closing_line(workdir: str, summary: dict, select: str) -> str:
  """What a finished run prints on stdout: where its files are, and its best member by the
  task's model-selection metric ``select`` at that member's best epoch (diverged members
  left out), with the test metrics of that epoch."""
  members = [m for m in summary["members"] if not m["diverged"] and select in m["best"]]
  files = "summary.json, metrics.jsonl, checkpoints/, tensorboard/"
  count, epochs = len(summary["members"]), summary["epochs"]
  head = (
    f"Trained {workdir} ({count} member{'s' * (count != 1)}, {epochs} epoch{'s' * (epochs != 1)})"
  )
  if not members:
    return f"{head}; files: {files}."
  best = min(members, key=lambda m: m["best"][select])
  tests = ", ".join(f"{k} {v:.4g}" for k, v in best["best"].items() if k.startswith("test_"))
  return (
    f"{head}; best by {select}: lr={best['learning_rate']:g} seed={best['seed']}, {select} "
    f"{best['best'][select]:.4g} at epoch {best['best_epoch']:g}{f' ({tests})' if tests else ''}; "
    f"files: {files}."
  )


def run_command(program: str | None = None) -> None:
  """``gelujax train`` with ``sys.argv``'s flags, named ``program``
  (`gelujax.cli._flags.run`)."""
  define_flags()
  flags.mark_flag_as_required("task")
  _flags.run(sys.modules[__name__], program)
