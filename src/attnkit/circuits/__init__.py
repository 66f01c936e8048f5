"""Which path carries a behaviour: causal analysis over a model's named sites.

    pairs.py      contrastive inputs (a clean and a corrupted text, an answer and a foil), read
                  from a file or built for the model's tokenizer, and the metrics people use
    patching.py   activation patching (every head, its pattern or its values alone, every
                  layer's stream at every position) and attribution patching (the same from one
                  forward and one backward pass)
    paths.py      path patching (a head's effect on a later head through its query, key or
                  value) and the composition scores of the weights beside it
    qk.py         why a head attends: its score at one cell as the sum of what wrote the query's
                  and the key's streams
    ov.py         what a head writes: its OV circuit from the tokens to the logits, its copying
                  score and the tokens it raises
    logit.py      direct logit attribution of every head and MLP, and the logit lens
    streams.py    the residual stream as the sum of what wrote it, and the final norm and
                  unembedding read linearly (the norm's scale frozen at its value)
    reading.py    how an attention layer reads its stream: the norm found and frozen, the
                  attention module run on inputs of attnkit's choosing, a head recomputed

Everything runs through ``LoadedModel.run`` and ``cache``: any model attnkit loads whose output
is token logits (a decoder-only language model, a translator, a transformers encoder-decoder).
"""

from .logit import LogitAttribution, direct_logit_attribution, logit_lens
from .ov import OVCircuits, ov_circuits
from .pairs import METRICS, Pair, name_swap_pairs, read_pairs, repeated_pairs
from .patching import Patching, Unit, activation_patching, agreement, attribution_patching, patched_together
from .paths import PathPatching, composition_scores, path_patching
from .qk import QKAttribution, qk_attribution

__all__ = [
    "METRICS",
    "LogitAttribution",
    "OVCircuits",
    "Pair",
    "Patching",
    "PathPatching",
    "QKAttribution",
    "Unit",
    "activation_patching",
    "agreement",
    "attribution_patching",
    "composition_scores",
    "direct_logit_attribution",
    "logit_lens",
    "name_swap_pairs",
    "ov_circuits",
    "patched_together",
    "path_patching",
    "qk_attribution",
    "read_pairs",
    "repeated_pairs",
]
