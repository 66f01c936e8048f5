"""The attribution methods by name, with what a figure calls each: what the command line offers
(without loading torch) and ``methods`` runs."""

from __future__ import annotations

# methods over a record's attention maps alone
MAP_METHODS = {
    "attention": "raw attention, last layer, mean of heads",
    "rollout": "attention rollout (Abnar & Zuidema 2020)",
    "flow": "attention flow (Abnar & Zuidema 2020)",
}
# methods over the model's gradients (``gradients``)
GRADIENT_LABELS = {
    "grad-attention": "gradient-weighted attention (Chefer et al. 2021)",
    "integrated-gradients": "integrated gradients (Sundararajan et al. 2017)",
    "input-x-gradient": "input × gradient (Shrikumar et al. 2016)",
}
# methods that need the model itself, not only its maps
MODEL_METHODS = {"value-norm": "value-norm (Kobayashi et al. 2020), last layer", **GRADIENT_LABELS}
ALL_METHODS = [*MAP_METHODS, *MODEL_METHODS]
LABELS = {**MAP_METHODS, **MODEL_METHODS}  # what a figure calls each
CAPTION_METHODS = ["attention", *GRADIENT_LABELS]  # what explains a caption's words
