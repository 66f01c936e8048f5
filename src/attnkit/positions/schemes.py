"""The positional schemes by name: what a model config's ``positions`` key and the command line's
figures offer (torch-free)."""

POSITION_SCHEMES = ("sinusoidal", "learned", "fourier", "relative", "t5", "rope", "alibi", "none")
POSITION_ENCODINGS = POSITION_SCHEMES[:-1]  # every scheme but none: those that have something to draw
