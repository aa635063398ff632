"""Every command that opens a store tells a store folder that does not exist from a folder that is no
memory store: two messages, two kinds of :class:`NotAStoreError`, both exit 2 in one line."""

from __future__ import annotations

import pickle

import pytest

from lychee_ray.io.store import NotAStoreError

# the arguments each command needs besides --memory to get as far as opening the store
COMMANDS = {
    "list": [], "errors": [], "stats": [], "verify": [], "migrate": [], "inspect": [],
    "query": ["--conversation", "c-1", "--llm", "rules", "Where did the trip go?"],
    "history": ["--conversation", "c-1", "--slot", "user · city"],
    "forget": ["--user", "u-1", "--record", "r-1", "--yes"],
    "delete": ["--conversation", "c-1", "--yes"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_folder_and_a_folder_that_is_no_store_are_told_apart(command, tmp_path, capsys):
    from lychee_ray.cli.main import main

    missing, plain = tmp_path / "no-such-folder", tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a store")
    assert main([command, "--memory", str(missing), *COMMANDS[command]]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"lychee-ray {command}: no memory store at {missing}: the folder does not exist"]
    assert main([command, "--memory", str(plain), *COMMANDS[command]]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"lychee-ray {command}: not a memory store (no commits/): {plain}"]
    assert not missing.exists() and sorted(p.name for p in plain.iterdir()) == ["notes.txt"]  # nothing created


def test_the_kind_is_data_and_survives_pickling(tmp_path):
    missing = NotAStoreError(tmp_path / "gone")
    assert missing.kind == "missing" and missing.root == str(tmp_path / "gone")
    assert NotAStoreError(tmp_path).kind == "not_a_store"
    again = pickle.loads(pickle.dumps(missing))  # crosses process boundaries under Ray
    assert (type(again), again.kind, str(again)) == (NotAStoreError, "missing", str(missing))
    assert NotAStoreError(tmp_path / "gone", kind="not_a_store").kind == "not_a_store"  # told: not looked up
