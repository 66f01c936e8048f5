"""Metrics (sacreBLEU BLEU and chrF, always with signatures) and test-set evaluation."""

from .evaluate import (
    Evaluation,
    evaluate,
    evaluate_files,
    moses_detokenize,
    moses_tokenize_lc,
)
from .metrics import Score, bleu, chrf

__all__ = ["Evaluation", "Score", "bleu", "chrf", "evaluate", "evaluate_files", "moses_detokenize", "moses_tokenize_lc"]
