r"""Reproduces one of the paper's experiments end to end: grids -> selection -> table + figures.

The work is `gelujax.study.reproduce`; this script only reads its flags. Examples:

  python experiments/reproduce.py --task mnist --dataset fashion_mnist
  python experiments/reproduce.py --task mnist_noise --dataset fashion_mnist
  python experiments/reproduce.py --task twitter_pos --data_dir /data/twitter_pos
  python experiments/reproduce.py --task mnist --dataset fashion_mnist --render

Finished runs are skipped and partial ones resume from their checkpoints; results go to
results/<dataset>/<task>/ (see WORKSPACE.md, "Reproducing the paper"). --render trains nothing
and rebuilds the result from the runs' files alone.
"""

import signal
import sys
from pathlib import Path

from absl import app, flags, logging

from gelujax import checkpoints, cli, devices, study
from gelujax.paper import PAPER_TASKS

_TASK = flags.DEFINE_string(
  "task", None, f"The experiment: one of {', '.join(PAPER_TASKS)} (or any registered task)."
)
_DATASET = flags.DEFINE_string("dataset", None, "Dataset for the task (default: the task's own).")
_ACTIVATIONS = flags.DEFINE_list(
  "activations", None, f"Activations, one run each; default: {','.join(study.DEFAULT_ACTIVATIONS)}."
)
_SEEDS = flags.DEFINE_list(
  "seeds",
  None,
  "A count N (seeds 0..N-1) or a comma list ('7,' is the one seed 7); default: the task's count.",
)
_LEARNING_RATES = flags.DEFINE_list("learning_rates", None, "Learning rates; default: the task's.")
_DROPOUT_RATES = flags.DEFINE_list(
  "dropout_rates", None, "Dropout rates, one run each; default: the paper's."
)
_EPOCHS = flags.DEFINE_integer(
  "epochs", None, "Training epochs; default: the task's (the paper's)."
)
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Directory holding the dataset files.")
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
  "compilation_cache", devices.DEFAULT_CACHE, "Folder that keeps compiled programs between "
  "runs; 'none' disables it."
)  # fmt: skip
_RENDER = flags.DEFINE_bool(
  "render", False, "Train nothing: rebuild tables, figures and README from the runs in --out."
)


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
  # `kill` unwinds like Ctrl-C: a checkpoint being written is finished, training time is kept.
  signal.signal(signal.SIGTERM, checkpoints.interrupt)
  if not flags.FLAGS["verbosity"].present:  # Orbax logs every checkpoint step at INFO.
    logging.set_verbosity(logging.WARNING)
  try:
    devices.enable_compilation_cache(_COMPILATION_CACHE.value)
    out = study.reproduce(
      _TASK.value,
      root=Path(__file__).resolve().parent.parent,
      dataset=_DATASET.value,
      activations=_ACTIVATIONS.value,
      seeds=_SEEDS.value,
      learning_rates=_LEARNING_RATES.value,
      dropout_rates=_DROPOUT_RATES.value,
      epochs=_EPOCHS.value,
      data_dir=_DATA_DIR.value,
      embeddings=_EMBEDDINGS.value,
      out=_OUT.value,
      render=_RENDER.value,
      cpu_devices=_CPU_DEVICES.value,
    )
  except ValueError as e:  # Bad flag values; a diverged run is reported in the table instead.
    sys.exit(f"reproduce.py: error: {' '.join(str(e).split())}")
  except (KeyboardInterrupt, Exception) as e:  # Ctrl-C or kill, or a damaged compiled program.
    cli.exit_stopped("reproduce.py", e)
  print(f"Wrote {out}/README.md, table.md, summary.json and figures.", flush=True)


if __name__ == "__main__":
  app.run(main)
