"""sacreBLEU (Post 2018) corpus BLEU and chrF with the signature that makes them comparable.

Two conventions for Multi30k (Elliott et al. 2016):
* tokenized + lowercased references (Multi30k tok files): ``tokenize="none"``,
  comparable to published Multi30k figures;
* detokenized, cased text: sacreBLEU's default ``13a`` tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Score:
    name: str
    score: float
    signature: str

    def __str__(self) -> str:
        return f"{self.name} = {self.score:.2f}  ({self.signature})"


def _check(hyps: list[str], refs: list[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")


def bleu(hyps: list[str], refs: list[str], *, tokenize: str = "13a", lowercase: bool = False) -> Score:
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    # force: with tokenize="none" the text is tokenized on purpose (Multi30k tok files)
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, force=tokenize == "none")
    result = metric.corpus_score(hyps, [refs])
    return Score("BLEU", result.score, str(metric.get_signature()))


def chrf(hyps: list[str], refs: list[str]) -> Score:
    from sacrebleu.metrics import CHRF

    _check(hyps, refs)
    metric = CHRF()
    return Score("chrF2", metric.corpus_score(hyps, [refs]).score, str(metric.get_signature()))
