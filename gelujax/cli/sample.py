"""``gelujax sample``: text from a trained character-level model (:mod:`gelujax.sample`).

  gelujax sample --workdir=workdirs/char_lm_tiny_shakespeare_gelu --length=500

A one-line error (exit 1) for a workdir that holds no such run; the text on stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None, prog: str = "gelujax sample") -> int:
  parser = argparse.ArgumentParser(
    prog=prog, description="Print text drawn from a trained character-level model's member."
  )
  parser.add_argument("--workdir", required=True, help="the run's folder (gelujax train's)")
  parser.add_argument("--length", type=int, default=500, help="characters to draw (500)")
  parser.add_argument("--prompt", default="\n", help="the text to continue (a newline)")
  parser.add_argument("--member", type=int, default=0, help="which member (0)")
  parser.add_argument("--seed", type=int, default=0, help="the draws' seed (0)")
  parser.add_argument(
    "--temperature", type=float, default=1.0, help="softmax temperature; 0: the likeliest (1)"
  )
  parser.add_argument("--data_dir", default=None, help="the data's folder, as for train")
  args = parser.parse_args(argv)
  from gelujax.sample import sample_run  # here: --help needs no JAX

  try:
    text = sample_run(
      args.workdir, length=args.length, prompt=args.prompt, member=args.member, seed=args.seed,
      temperature=args.temperature, data_dir=args.data_dir,
    )  # fmt: skip
  except ValueError as e:
    print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 1
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
