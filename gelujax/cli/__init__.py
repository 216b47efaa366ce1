"""The command line: ``gelujax train``, ``gelujax reproduce``, ``gelujax data`` and
``gelujax sample``.

``gelujax`` is the console script ``pyproject.toml`` installs (:func:`main`), and ``python -m
gelujax`` the same; each command is also ``python -m gelujax.<command>``, and
``experiments/train.py`` and ``experiments/reproduce.py``, the design card's way, run the same
two. Whichever way in, a command is one implementation with one definition of each flag:
:mod:`gelujax.cli.train`, :mod:`gelujax.cli.reproduce` (absl flags, their shared handling in
:mod:`gelujax.cli._flags`) and :mod:`gelujax.data.__main__` (argparse). Nothing else in gelujax
defines or parses a flag.

A command's module defines its absl flags when it runs (``define_flags``), never when it is
imported: absl keeps one set of flags a process and the two commands share flag names with
different help, so importing both (a documentation tool, a script) must define neither.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from gelujax.registry import close_names, did_you_mean, sentences

# Each command: its module and what it does, as ``gelujax --help`` lists them.
COMMANDS = {
  "train": ("gelujax.cli.train", "train one task's grid of learning rates x seeds"),
  "reproduce": (
    "gelujax.cli.reproduce",
    "reproduce one of the paper's experiments end to end (results under ./results/)",
  ),
  "data": (
    "gelujax.data.__main__",
    "download data sets ahead of time, or list where each would be read from",
  ),
  "sample": ("gelujax.cli.sample", "print text drawn from a trained character-level model"),
}


def usage() -> str:
  """``gelujax --help``: the commands, and how to see each one's flags."""
  width = max(map(len, COMMANDS))
  lines = [
    "usage: gelujax COMMAND [FLAGS]",
    "",
    "commands:",
    *[f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items()],
    "",
    "gelujax COMMAND --help lists a command's flags; python -m gelujax.COMMAND is the same "
    "command.",
  ]
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  """``gelujax COMMAND [FLAGS]``: runs COMMAND with the rest of the command line (``argv``,
  ``sys.argv`` where None); returns the exit status (a command may exit itself)."""
  words = list(sys.argv[1:] if argv is None else argv)
  if words and words[0] in ("-h", "--help", "help"):
    print(usage())
    return 0
  if not words or words[0] not in COMMANDS:
    problem = f"unknown command {words[0]!r}." if words else "a command is needed after gelujax."
    hint = did_you_mean(close_names(words[0], COMMANDS)) if words else ""
    print(
      f"gelujax: error: {sentences(problem, hint)} Commands: {', '.join(COMMANDS)}; "
      "gelujax --help says what each does.",
      file=sys.stderr,
    )
    return 2
  name, *rest = words
  program = f"gelujax {name}"
  module = importlib.import_module(COMMANDS[name][0])
  if name in ("data", "sample"):  # argparse commands
    return module.main(rest, prog=program)
  sys.argv = [program, *rest]  # absl parses sys.argv, and names the command by its first word.
  module.run_command()
  return 0
