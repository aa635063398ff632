"""Eval metrics: pure scoring functions, no run machinery (imports no other ``eval`` subpackage).

- :mod:`.evidence` — by evidence id: coverage, evidence and session recall, abstention;
- :mod:`.context` — by context text: content coverage, answer-in-context;
- :mod:`.locomo` — LoCoMo's official answer F1 and the Mem0/LoCoMo BLEU-1;
- :mod:`.segmentation` — Pk, WindowDiff and boundary F1 of a segmentation;
- :mod:`.record_quality` — a built store's records measured from the outside (duplicates, ...).
"""
