"""``python experiments/train.py``, the design card's way to train: the command ``gelujax train``
(:mod:`gelujax.cli.train`: its flags, ``--help`` and implementation), run as a script."""

from gelujax.cli import train
from gelujax.cli.train import main  # noqa: F401  (tests and benchmarks call a script's main)

train.define_flags()  # The script's flags, for a test or benchmark that parses them and calls main.

if __name__ == "__main__":
  train.run_command()
