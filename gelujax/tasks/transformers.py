"""Tasks not in the paper, the GELU family in a transformer's feed-forward: the ViTs
(``vit_fashion_mnist``, ``vit_cifar10``), the tweet tagger (``transformer_twitter_pos``) and the
character-level GPT (``char_lm``)."""

from __future__ import annotations

from gelujax.tasks.paper import MNIST_LIKE
from gelujax.tasks.registry import register
from gelujax.tasks.spec import TaskSpec

# vit_fashion_mnist's epochs: 10 members train them in about 15 minutes on 2 CPU cores, by the
# timing trial its docstring names (its looped step's time, 429 steps an epoch).
EPOCHS_VIT = 10


@register
def vit_fashion_mnist_task() -> TaskSpec:
  """Not in the paper: a small Vision Transformer on Fashion-MNIST (:class:`gelujax.models.ViT`),
  the GELU family where it is used today: 16 patches of 7x7 pixels, 2 pre-LayerNorm blocks of
  width 48 with 4 heads and a feed-forward of 192 (a gated linear unit such as ``geglu`` gives
  a gated one at the same parameter count), mean-pooled, 55k/5k/10k as ``mnist``.

  *(choice)* Adam at a constant rate from {1e-3, 3e-4}, batch 128, no dropout, the exact GELU
  (ViT's and BERT's form), selected on the validation loss. *(choice)* The size and
  ``EPOCHS_VIT`` epochs come from a timing trial, so that 10 members (one arm of a 10-seed grid)
  train in about 15 minutes on 2 CPU cores: `benchmarks/results/members_cpu_vit.md` (10
  members, their training step looped as this CPU's rule trains them, times the 429 steps of an
  epoch, plus about a tenth for the evaluations); a larger preset (49 patches, width 64, 4
  blocks) was an order of magnitude slower a step (`members_cpu.md`).
  """
  return TaskSpec(
    name="vit_fashion_mnist",
    dataset="fashion_mnist",
    datasets=MNIST_LIKE,
    model="vit_fashion_mnist",
    activation="gelu",
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=128,
    epochs=EPOCHS_VIT,
  )


@register
def vit_cifar10_task() -> TaskSpec:
  """Not in the paper: a Vision Transformer on CIFAR-10 (:class:`gelujax.models.ViT`), for
  machines with an accelerator and the data: 64 patches of 4x4 pixels, 6 pre-LayerNorm blocks
  of width 192 with 3 heads and a feed-forward of 768 (ViT-Tiny's width at half its depth; a
  gated linear unit such as ``geglu`` gives a gated feed-forward at the same parameter count),
  mean-pooled; 2.69 million parameters (``tests/test_models.py`` counts them by hand).

  *(choice)* Images scaled to [0, 1] minus the train split's per-pixel mean (``pixel_mean``),
  random crops of the 4-pixel zero-padded image (``crop_padding``), Adam at a constant rate
  from {1e-3, 3e-4}, batch 128, no dropout, the exact GELU (ViT's form), 10 seeds, 100 epochs
  of the 45k training images (35,100 steps a member), selected on the validation loss.
  *(choice)* Sized for an accelerator, not this project's 2 CPU cores: its steps are untimed
  here (no accelerator was lent when it was added); ``benchmarks/members.py`` on a GPU session
  times them.
  """
  return TaskSpec(
    name="vit_cifar10",
    dataset="cifar10",
    datasets=("cifar10",),
    model="vit_cifar10",
    activation="gelu",
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=128,
    epochs=100,
    preprocessing=("pixel_mean",),
    crop_padding=4,
  )


# transformer_twitter_pos's epochs, from its timing trial (its docstring): 10 members in about
# 15 minutes on 2 CPU cores.
EPOCHS_TAGGER = 80


@register
def transformer_twitter_pos_task() -> TaskSpec:
  """Not in the paper: Twitter POS by a tagger that reads the whole tweet
  (:class:`gelujax.models.TransformerTagger`), the GELU family in a transformer's feed-forward
  on the paper's tagging data. Each example is a tweet (the ``group_tweets`` step, after
  ``spell_words``: each token's word id, hashed character n-grams and shape flags, the window
  model's features of its centre word; padded to the longest tweet of any split), each token
  embedded as ``spelling_mlp_twitter_pos`` embeds a word, projected to width 64 with a learned
  position, 2 pre-LayerNorm blocks of 4 heads and a feed-forward of 256 (a gated linear unit
  such as ``geglu`` gives a gated one at the same parameter count) attending over the tweet's
  tokens and never its padding, and 25 tags per token; the loss is the mean cross-entropy over
  a batch's tokens, and the metrics are means per token (``token_classification``), as the
  window model's. The substitute for the unavailable pretrained embeddings is the one of
  ``results/twitter_pos/twitter_pos_spelling`` (trainable word and n-gram tables, word dropout
  0.25); that result's window MLP is the test error to beat.

  *(choice)* Adam at a constant rate from {1e-3, 3e-4}, batches of 16 tweets, dropout 0.1 on
  the residual branches, the exact GELU (BERT's form), 10 seeds, selected on the validation
  error (as ``twitter_pos``). *(choice)* ``EPOCHS_TAGGER`` = 80 epochs, from a timing trial
  (``benchmarks/results/members_cpu_tagger.md``: ``python benchmarks/members.py --cpu --name
  members_cpu_tagger --data_dir <the ARK files>``, on 2 quiet AMD EPYC cores): 10 members (one
  arm of a 10-seed grid) take 143 ms a step, looped as this CPU's rule takes them, and an epoch
  of the 1,000 training tweets is 62 steps, so 80 epochs are about 12 minutes of steps, about
  15 with the evaluations.
  """
  return TaskSpec(
    name="transformer_twitter_pos",
    dataset="twitter_pos",
    datasets=("twitter_pos",),
    model="transformer_twitter_pos",
    model_options={"word_dropout": 0.25},
    activation="gelu",
    dropout=0.1,
    learning_rates=(1e-3, 3e-4),
    seeds=10,
    batch_size=16,
    epochs=EPOCHS_TAGGER,
    select_metric="validation_error",
    objective="token_classification",
    preprocessing=("spell_words", "group_tweets"),
  )


@register
def char_lm_task() -> TaskSpec:
  """Not in the paper: a character-level language model, where the GELU family's claims were
  made (GPT-2's tanh form, Gemma's GEGLU, LLaMA's SwiGLU): :class:`gelujax.models.CharGPT` on
  Tiny Shakespeare (`gelujax.data.shakespeare`: 65 characters; the first 90% of the text to
  train on, then 5% to validate and 5% to test), at nanoGPT's ``shakespeare_char`` CPU
  configuration: windows of 64 characters, batches of 12, 4 decoder blocks of 4 heads at width
  128 (feed-forward 512), dropout 0, AdamW (β2 0.99, weight decay 0.1, clipping at 1) at a peak
  rate of 1e-3 warmed up over 100 steps and decayed by a cosine to 1e-4 at the last step, 2000
  steps. The loss is the mean cross-entropy of the next character in nats (bits per character
  = nats / ln 2), over every character of a batch's windows; evaluation covers every character
  of the validation and test texts (``token_classification``: ``error`` is the share of
  characters whose most likely prediction is wrong).

  *(choice)* An epoch is 500 steps of windows drawn from a fresh permutation of all the training
  text's windows (every start position), without replacement within it (nanoGPT draws windows
  with replacement), so the 2000 steps are 4 epochs, evaluated twice an epoch (every 250 steps,
  nanoGPT's interval) on the whole validation text (nanoGPT estimates it from 20 random batches);
  the best evaluation selects by validation loss. *(choice)* The exact GELU, as nanoGPT's
  ``nn.GELU()``. *(choice)* One seed; a study sets its own.
  """
  return TaskSpec(
    name="char_lm",
    dataset="tiny_shakespeare",
    datasets=("tiny_shakespeare",),
    model="char_gpt_cpu",
    data_options={"block_size": 64},
    activation="gelu",
    learning_rates=(1e-3,),
    seeds=1,
    batch_size=12,
    epochs=4,
    steps_per_epoch=500,
    evals_per_epoch=2,
    objective="token_classification",
    optimizer="adamw_cosine",
  )
