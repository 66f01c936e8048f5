"""The weights a model forms, heard at its attention sites, grouped as the tests read them."""

from __future__ import annotations

from attnkit.attention import sites


def formed(run):
    """``run()`` with every attention call's weights formed (the explicit path) and heard:
    (its result, {kind: [weights (b, h, t, s), one per call]}, the last p_t (b, t) or None)."""
    heard = sites.Weights()
    with sites.listening(heard):
        out = run()
    maps: dict = {}
    p_t = None
    for site, w, p in heard.take():
        maps.setdefault(site.kind, []).append(w)
        p_t = p if p is not None else p_t
    return out, maps, p_t
