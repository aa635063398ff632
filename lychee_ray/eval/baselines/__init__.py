"""What lychee is measured against (imports no other ``eval`` subpackage).

- :mod:`.retrieval` — retrieval baselines at lychee's token budget (turn, sentence and hybrid RAG,
  full context);
- :mod:`.texttiling` — embedding TextTiling, the segmentation reference (standard and oracle-count).
"""
