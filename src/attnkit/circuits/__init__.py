"""Which path carries a behaviour: causal analysis over a model's named sites.

    pairs.py      contrastive inputs (a clean and a corrupted text, an answer and a foil), read
                  from a file or built for the model's tokenizer, and the metrics people use
    patching.py   activation patching (every head, every layer's stream at every position) and
                  attribution patching (the same from one forward and one backward pass)
    logit.py      direct logit attribution of every head and MLP, and the logit lens
    streams.py    the residual stream as the sum of what wrote it, and the final norm and
                  unembedding read linearly (the norm's scale frozen at its value)

Everything runs through ``LoadedModel.run`` and ``cache``: any model attnkit loads whose output
is token logits (a decoder-only language model, a translator, a transformers encoder-decoder).
"""

from .logit import LogitAttribution, direct_logit_attribution, logit_lens
from .pairs import METRICS, Pair, name_swap_pairs, read_pairs, repeated_pairs
from .patching import Patching, Unit, activation_patching, agreement, attribution_patching, patched_together

__all__ = [
    "METRICS",
    "LogitAttribution",
    "Pair",
    "Patching",
    "Unit",
    "activation_patching",
    "agreement",
    "attribution_patching",
    "direct_logit_attribution",
    "logit_lens",
    "name_swap_pairs",
    "patched_together",
    "read_pairs",
    "repeated_pairs",
]
