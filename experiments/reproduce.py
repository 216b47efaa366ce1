"""``python experiments/reproduce.py``, the design card's way to reproduce the paper: the command
``gelujax reproduce`` (:mod:`gelujax.cli.reproduce`: its flags, ``--help`` and implementation),
run as a script."""

from gelujax.cli import reproduce
from gelujax.cli.reproduce import main  # noqa: F401  (tests and benchmarks call a script's main)

reproduce.define_flags()  # Its flags, for a test or benchmark that parses them and calls main.

if __name__ == "__main__":
  reproduce.run_command()
