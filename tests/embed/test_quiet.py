"""Quiet first query (issue 39 item 7): preparing the embedding model (ONNX export, int8
quantisation) says once what it does and lets none of the tools' own log lines through; the
``rules`` backend notice appears once per command, also when the command starts worker processes."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from lychee_ray.config import EmbeddingConfig, LLMConfig
from lychee_ray.llm import backend as backend_mod
from lychee_ray.llm.backend import resolve_backend

pytestmark = pytest.mark.reliability  # listed in docs/reliability.md (issue 39)


@pytest.mark.heavy
def test_preparing_the_query_model_logs_one_line_and_no_third_party_lines(tmp_path, caplog):
    from lychee_ray.embed.local import LocalEmbedder

    root = logging.getLogger()
    with caplog.at_level(logging.DEBUG):  # everything, from every logger
        e = LocalEmbedder(EmbeddingConfig(onnx_cache_dir=str(tmp_path)), quantize="int8")
    assert e.runtime == "onnx-int8" and len(list(tmp_path.glob("*.onnx"))) == 2  # exported and quantised here
    third = [r for r in caplog.records if not r.name.startswith("lychee_ray")
             and ("onnxruntime" in r.pathname or "/onnx/" in r.pathname or r.name == "root")]
    assert not third, [f"{r.name}: {r.getMessage()[:80]}" for r in third[:5]]
    prepared = [r.getMessage() for r in caplog.records if "preparing the embedding model once" in r.getMessage()]
    assert len(prepared) == 1 and "ONNX export and int8 quantisation" in prepared[0] and str(tmp_path) in prepared[0]
    assert not [f for f in root.filters if type(f).__name__ == "_DropThirdParty"]  # muted only while preparing
    assert all(not [f for f in h.filters if type(f).__name__ == "_DropThirdParty"] for h in root.handlers)


@pytest.mark.subprocess
def test_rules_notice_once_per_command_also_in_processes_it_starts(monkeypatch, caplog):
    monkeypatch.setattr(backend_mod, "_logged_rules", False)
    monkeypatch.delenv(backend_mod.NOTICE_ENV, raising=False)
    with caplog.at_level(logging.WARNING, logger="lychee_ray.llm.backend"):
        for _ in range(3):
            assert resolve_backend(LLMConfig()) == "rules"
    assert len([r for r in caplog.records if "LLM backend: rules" in r.getMessage()]) == 1
    assert os.environ[backend_mod.NOTICE_ENV] == "rules"
    child = ("import logging; logging.basicConfig(); from lychee_ray.config import LLMConfig; "
             "from lychee_ray.llm.backend import resolve_backend; print(resolve_backend(LLMConfig()))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "rules" and "LLM backend: rules" not in out.stderr, out.stderr
    fresh = {k: v for k, v in env.items() if k != backend_mod.NOTICE_ENV}  # another command says it again
    out = subprocess.run([sys.executable, "-c", child], env=fresh, capture_output=True, text=True, timeout=120)
    assert "LLM backend: rules" in out.stderr
