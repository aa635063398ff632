"""A one-shot ``lychee-ray query`` loads only what it needs: with the embedding model's ONNX export
cached, neither torch nor sentence-transformers (nor transformers) is imported (loading the model took
seconds before a 20 ms search); with the offline ``rules`` backend neither the ``openai`` package (its
schemas alone cost a second), the service's web framework nor Ray is. No timing is asserted: what is
loaded is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.stores import conversation_spec, make_store

Q = "When did Caroline go to the LGBTQ support group?"
HEAVY = ("torch", "sentence_transformers", "transformers", "openai", "fastapi", "ray")
# Runs the CLI in a fresh interpreter, then records its exit code and which heavy modules it imported.
_PROBE = """
import json, sys
from lychee_ray.cli.main import main
rc = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "heavy": [m for m in %r if m in sys.modules]}, f)
""" % (HEAVY,)


@pytest.mark.subprocess
def test_cli_query_with_a_cached_onnx_model_imports_no_torch(tmp_path, embedder):
    from lychee_ray.config import EmbeddingConfig
    from lychee_ray.embed import get_embedder

    store = make_store(tmp_path / "store", embedder, [conversation_spec("c-1", "u-1")])
    get_embedder(EmbeddingConfig(), queries=True)  # warms the ONNX cache (export + int8 copy) if it is cold
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(report), "query", "--memory", str(store), "--conversation", "c-1",
         "--question-date", "2023-08-01", "--llm", "rules", "--json", Q],
        env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(report.read_text())
    assert got == {"rc": 0, "heavy": []}, got
    res = json.loads(proc.stdout)
    assert res["conversation_ids"] == ["c-1"] and res["evidence"] and "support group" in res["answer"]
    assert "embed" in res["timings"]
