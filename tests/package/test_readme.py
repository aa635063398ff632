"""The README's Python example runs as written (rules backend, local runner, no Ray)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Use it from Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("LYCHEE_LLM_BASE_URL", raising=False)
    ray_loaded = "ray" in sys.modules
    exec(compile(_python_example(), str(README), "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 conversations built,")
    assert "Pixel" in out[1]
    assert "7 May 2023" in out[2]
    assert (tmp_path / "out/quickstart/manifest.json").exists()
    if not ray_loaded:
        assert "ray" not in sys.modules  # the local runner never imports Ray
