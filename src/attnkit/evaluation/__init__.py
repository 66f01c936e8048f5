"""Metrics: sacreBLEU BLEU and chrF, always with their signatures."""

from .metrics import Score, bleu, chrf

__all__ = ["Score", "bleu", "chrf"]
