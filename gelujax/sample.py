"""Text from a trained character-level model: what a ``char_lm`` run learned, to read.

`generate` continues a prompt one character at a time from a trained member's parameters: at
each step the model reads the last ``block`` characters (the window length it was trained on;
a shorter context is padded on the left with the prompt's first character, as a window of the
text would hold earlier characters), and the next character is drawn from its softmax at
``temperature`` (0: the most likely one), each draw from a key folded from ``seed`` and the
step, so that the same arguments give the same text. `sample_run` reads the run's newest
checkpoint (`gelujax.engine.restore`) and its data's vocabulary, and generates from one member.
``gelujax sample --workdir=DIR`` is the command.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def generate(
  model: Any,
  params: Any,
  vocab: list[str],
  prompt: str,
  length: int,
  *,
  block: int,
  seed: int = 0,
  temperature: float = 1.0,
) -> str:
  """``prompt`` and ``length`` more characters drawn from ``model`` (a Linen model of character
  ids ``[1, block]`` -> logits ``[1, block, len(vocab)]``) with ``params``.

  Raises:
    ValueError: an empty prompt, a character outside the vocabulary, a negative length or
      temperature.
  """
  index = {c: i for i, c in enumerate(vocab)}
  unknown = sorted({c for c in prompt if c not in index})
  if not prompt or unknown:
    raise ValueError(
      f"The prompt {prompt!r} must be at least one character, each of the model's vocabulary "
      f"of {len(vocab)} ({''.join(vocab)!r}); {unknown} are not."
    )
  if length < 0 or temperature < 0:
    raise ValueError(f"length {length} and temperature {temperature} must be >= 0.")

  @jax.jit
  def next_id(window, key):
    logits = model.apply({"params": params}, window[None], train=False)[0, -1]
    if temperature == 0:
      return jnp.argmax(logits)
    return jax.random.categorical(key, logits / temperature)

  ids = [index[c] for c in prompt]
  key = jax.random.key(seed)
  for step in range(length):
    context = ids[-block:]
    window = np.asarray([ids[0]] * (block - len(context)) + context, np.int32)
    ids.append(int(next_id(window, jax.random.fold_in(key, step))))
  return "".join(vocab[i] for i in ids)


def sample_run(
  workdir: str,
  *,
  length: int = 500,
  prompt: str = "\n",
  member: int = 0,
  seed: int = 0,
  temperature: float = 1.0,
  data_dir: str | None = None,
) -> str:
  """Text from member ``member`` of the run in ``workdir`` (its newest checkpoint), which must
  be a character-level model (a task whose data have a vocabulary of characters).

  Raises:
    ValueError: the workdir holds no run, no checkpoint, or a run of another kind of model;
      a member it does not have.
  """
  from gelujax import engine, tasks

  spec = tasks.read_task(workdir)
  splits = spec.load_data(data_dir)
  vocab = splits.info.get("vocab")
  if not vocab or any(len(c) != 1 for c in vocab):
    raise ValueError(
      f"Workdir {workdir} holds a run of task {spec.name!r}, whose data are not characters; "
      "text comes from a character-level model (task char_lm)."
    )
  parts = tasks.build(spec, splits)
  members, state = engine.restore(parts, workdir)
  if not 0 <= member < len(members):
    raise ValueError(f"member {member}: the run has members 0 to {len(members) - 1}.")
  params = jax.tree.map(lambda x: np.asarray(x)[member], state.params)
  block = splits["train"]["inputs"].shape[1]
  return generate(
    parts.model, params, vocab, prompt, length, block=block, seed=seed, temperature=temperature
  )
