"""Other frameworks' names for their GELUs, registered in :data:`ACTIVATIONS` as aliases
(``"torch:gelu"``) of the gelujax function that computes the same formula. Imported after the
functions: an alias's target must resolve when it is registered."""

from __future__ import annotations

from gelujax.activations.registry import ACTIVATIONS

# Other frameworks' GELUs by the names their users meet, each mapped to the gelujax function
# that computes the same formula (tests/test_activations.py checks each against the
# framework's own formula in float64). PyTorch: torch.nn.GELU and torch.nn.functional.gelu,
# approximate='none' (default) or 'tanh'.
ACTIVATIONS.alias("torch:gelu", "gelu")
ACTIVATIONS.alias("torch:gelu(approximate='none')", "gelu")
ACTIVATIONS.alias("torch:gelu(approximate='tanh')", "gelu_tanh")
# JAX and Flax (flax.linen.gelu and flax.nnx.gelu are jax.nn.gelu): the tanh form by default.
ACTIVATIONS.alias("jax:gelu", "gelu_tanh")
ACTIVATIONS.alias("jax:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("jax:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("flax:gelu", "gelu_tanh")
ACTIVATIONS.alias("flax:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("flax:gelu(approximate=False)", "gelu")
# TensorFlow's tf.nn.gelu and Keras' keras.activations.gelu (activation="gelu" in a layer):
# the exact form by default (Keras 3's keras.ops.gelu is not: its default is approximate=True).
ACTIVATIONS.alias("tf:gelu", "gelu")
ACTIVATIONS.alias("tf:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("tf:gelu(approximate=True)", "gelu_tanh")
ACTIVATIONS.alias("keras:gelu", "gelu")
ACTIVATIONS.alias("keras:gelu(approximate=False)", "gelu")
ACTIVATIONS.alias("keras:gelu(approximate=True)", "gelu_tanh")
# Hugging Face transformers: the ACT2FN keys of config.json's hidden_act.
ACTIVATIONS.alias("transformers:gelu", "gelu")
ACTIVATIONS.alias("transformers:gelu_python", "gelu")
ACTIVATIONS.alias("transformers:gelu_new", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_pytorch_tanh", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_python_tanh", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_accurate", "gelu_tanh")
ACTIVATIONS.alias("transformers:gelu_fast", "gelu_fast")
ACTIVATIONS.alias("transformers:quick_gelu", "gelu_sigmoid")
ACTIVATIONS.alias("transformers:gelu_10", "clipped_gelu(lower=-10.0, upper=10.0)")
# timm (timm.layers.get_act_layer / get_act_fn names).
ACTIVATIONS.alias("timm:gelu", "gelu")
ACTIVATIONS.alias("timm:gelu_tanh", "gelu_tanh")
ACTIVATIONS.alias("timm:quick_gelu", "gelu_sigmoid")
