"""The char_lm anchor: gelujax's character-level GPT at nanoGPT's ``shakespeare_char`` CPU
configuration, trained once with ``gelujax train --task=char_lm``, timed, sampled, and written up
against nanoGPT's published figure (a validation loss of about 1.88 after 2000 steps); with
``--config=gpu``, at its GPU configuration (block 256, batch 64, 6 layers, 6 heads, width 384,
dropout 0.2, 5000 steps, in bfloat16 as nanoGPT's autocast) against its 1.4697 on one A100.

  python scripts/char_lm_anchor.py --data_dir=PATH [--out=results/tiny_shakespeare/char_lm_anchor]
  python scripts/char_lm_anchor.py --config=gpu --data_dir=PATH
                                       (results/tiny_shakespeare/char_lm_anchor_gpu)
  python scripts/char_lm_anchor.py --render [--config=gpu]   (the README again from its files)

It keeps the run's config.json, metrics.jsonl and summary.json in ``run/`` (not its
checkpoints), the wall-clock seconds of the command (``timing.json``, with the machine) and a
sample of 500 characters (``sample.txt``, ``gelujax sample`` at temperature 1, seed 0), and
writes README.md from those files alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from char_lm_speed import CONFIGS  # noqa: E402 - the two configurations' one definition

KEPT = ("config.json", "metrics.jsonl", "summary.json")
# nanoGPT's README: its CPU configuration "gets ... a loss of only 1.88" after 2000 iterations
# (its last evaluation); the GPU one: "the best validation loss is 1.4697" (on one A100, about 3
# minutes). Each anchor: gelujax's flags (the task of `char_lm_speed.CONFIGS`, which the speed
# benchmark times), nanoGPT's figure and which evaluation it is, its command.
ANCHORS = {
  "cpu": {
    "flags": [f"--task={CONFIGS['cpu']['task']}"],
    "nanogpt_loss": 1.88,
    "nanogpt_which": "last",
    "nanogpt_command": "--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 "
    "--max_iters=2000 --lr_decay_iters=2000 --dropout=0.0",
  },
  "gpu": {
    "flags": [f"--task={CONFIGS['gpu']['task']}", "--dtype=bfloat16"],
    "nanogpt_loss": 1.4697,
    "nanogpt_which": "best",
    "nanogpt_command": "config/train_shakespeare_char.py: block_size 256, batch_size 64, n_layer "
    "6, n_head 6, n_embd 384, dropout 0.2, learning_rate 1e-3, max_iters 5000, min_lr 1e-4, "
    "beta2 0.99, warmup_iters 100; bfloat16 autocast, compiled",
  },
}


def train(out: Path, data_dir: str | None, anchor: str) -> None:
  from gelujax.host import describe_machine

  with tempfile.TemporaryDirectory() as scratch:
    workdir = Path(scratch) / "run"
    command = [sys.executable, "-m", "gelujax", "train", *ANCHORS[anchor]["flags"]]
    command += [f"--workdir={workdir}"]
    command += [f"--data_dir={data_dir}"] if data_dir else []
    begin = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - begin
    sample = subprocess.run(
      [sys.executable, "-m", "gelujax", "sample", f"--workdir={workdir}", "--length=500",
       *([f"--data_dir={data_dir}"] if data_dir else [])],
      check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    (out / "run").mkdir(parents=True, exist_ok=True)
    for name in KEPT:
      shutil.copy(workdir / name, out / "run" / name)
  (out / "sample.txt").write_text(sample)
  timing = {"seconds": round(seconds, 1), "machine": describe_machine(), "anchor": anchor}
  (out / "timing.json").write_text(json.dumps(timing, indent=1) + "\n")


def render(out: Path) -> str:
  config = json.loads((out / "run" / "config.json").read_text())
  records = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
  timing = json.loads((out / "timing.json").read_text())
  sample = (out / "sample.txt").read_text()
  software = config["software"][-1]
  spec = config["spec"]
  steps = spec["epochs"] * spec["steps_per_epoch"]
  name = timing.get("anchor", "cpu")
  anchor = ANCHORS[name]
  last = records[-1]
  if anchor["nanogpt_which"] == "best":
    judged = min(records, key=lambda r: r["validation_loss"])
    said = f"The best validation loss, at step {judged['step']} of {steps}, is"
  else:
    judged = last
    said = f"After {last['step']} steps the validation loss is"
  published = anchor["nanogpt_loss"]
  gap = judged["validation_loss"] - published
  verdict = "below" if gap < 0 else ("equal to" if gap == 0 else "above")
  rows = [
    f"| {r['step']} | {r['train_loss']:.4f} | {r['validation_loss']:.4f} | "
    f"{r['validation_loss'] / math.log(2):.4f} | {r['test_loss']:.4f} | "
    f"{100 * r['test_error']:.2f} |"
    for r in records
  ]
  git = software.get("git") or {}
  revision = git.get("commit", "unknown")[:10] + (
    " with changes not committed" * bool(git.get("dirty"))
  )
  flags = "" if name == "cpu" else " --config=gpu"
  runs = " ".join(f"'{f}'" if "(" in f else f for f in anchor["flags"])
  of = (
    "nanoGPT's CPU command (`" + anchor["nanogpt_command"] + "`)"
    if name == "cpu"
    else f"nanoGPT's GPU run ({anchor['nanogpt_command']}; here {spec['dtype']}, "
    f"dropout {spec['dropout']:g})"
  )
  best = (
    ""
    if judged is last
    else f" The last evaluation's, at step {last['step']}, is {last['validation_loss']:.4f}."
  )
  lines = [
    f"# char_lm: the anchor against nanoGPT's shakespeare_char ({name.upper()} configuration)",
    "",
    f"Command: `python scripts/char_lm_anchor.py{flags} "
    "--data_dir=/work/shared/data/tinyshakespeare` "
    f"(it runs `gelujax train {runs}`); revision {revision}; machine "
    f"{timing['machine']}; {timing['seconds']:.0f} s for the whole command (data, "
    f"compilation, {steps} steps, {len(records)} evaluations of the whole validation and test "
    "texts).",
    "",
    f"Seed {config['members'][0]['seed']}, peak learning rate "
    f"{config['members'][0]['learning_rate']:g}, {steps} steps of {spec['batch_size']} windows "
    f"of {spec['data_options']['block_size']} characters, the exact GELU: the configuration of "
    f"{of}.",
    "",
    f"{said} {judged['validation_loss']:.4f} nats per character, {verdict} nanoGPT's "
    f"published {published} ({judged['validation_loss'] / math.log(2):.3f} bits per "
    f"character).{best}",
    "",
    "| step | train loss (running mean) | validation loss (nats/char) | validation bits/char "
    "| test loss | test error (%) |",
    "|---|---|---|---|---|---|",
    *rows,
    "",
    "## What differs from nanoGPT",
    "",
    "- The validation text is the first half of nanoGPT's (the 5% after the training text; "
    "the last 5% is the test text, which nanoGPT does not keep), evaluated whole; nanoGPT "
    f"estimates its loss on {20 if name == 'cpu' else 200} random batches of its 10%. The two "
    "figures are not the same "
    "measurement: a comparison of level, not a tie to the third digit.",
    "- Windows are drawn without replacement within an epoch of 500 steps (nanoGPT: with "
    "replacement); the training loss is the running mean over each evaluation's steps.",
    "- gelujax's blocks keep Flax's biases and initializers (nanoGPT: no biases, scaled "
    "residual projections); the head is tied to the embedding in both.",
    "",
    "## A sample (500 characters, `gelujax sample`, temperature 1, seed 0)",
    "",
    "```",
    sample.rstrip("\n"),
    "```",
    "",
  ]
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--config", default="cpu", choices=sorted(ANCHORS))
  parser.add_argument(
    "--out",
    default=None,
    help="default: results/tiny_shakespeare/char_lm_anchor (cpu), char_lm_anchor_gpu (gpu)",
  )
  parser.add_argument("--render", action="store_true")
  args = parser.parse_args()
  suffix = "" if args.config == "cpu" else f"_{args.config}"
  out = Path(args.out or ROOT / "results" / "tiny_shakespeare" / f"char_lm_anchor{suffix}")
  if not args.render:
    train(out, args.data_dir, args.config)
  (out / "README.md").write_text(render(out))
  print(f"Wrote {out / 'README.md'}", file=sys.stderr)


if __name__ == "__main__":
  os.environ.setdefault("PYTHONPATH", str(ROOT))
  main()
