"""Every key the JSON output holds is documented in the README, and per-rank maps are in rank order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import FIXTURES, REAL, run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
SCENARIOS = sorted(p for p in REAL.iterdir() if p.is_dir())
# Maps whose keys are values, not names: op types, source labels, pairing kinds, ranks of a session.
DATA_MAPS = {"counts_by_type", "values", "pairing_totals", "where_stacks_part", "missing_steps"}


def documented_keys() -> set[str]:
    """Every name the README's JSON section spells as code or as a JSON string."""
    text = README.read_text()
    section = text[text.index("## JSON output"):text.index("\n## ", text.index("## JSON output") + 3)]
    return set(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', section)) | set(
        re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", section)) | set(
        re.findall(r'[{,]\s*"?([a-z_][a-z0-9_]*)"?\s*:', section))


def keys_in(obj, path: str = "$", found: dict[str, str] | None = None, data: bool = False) -> dict[str, str]:
    """key -> the first path it was seen at; keys of rank maps and DATA_MAPS are values, not walked as keys."""
    found = {} if found is None else found
    if isinstance(obj, dict):
        by_rank = bool(obj) and all(re.fullmatch(r"-?\d+", k) for k in obj)
        for key, value in obj.items():
            if data or by_rank:
                keys_in(value, f"{path}.*", found)
            else:
                found.setdefault(key, f"{path}.{key}")
                keys_in(value, f"{path}.{key}", found, data=key in DATA_MAPS)
    elif isinstance(obj, list):
        for value in obj:
            keys_in(value, f"{path}[]", found)
    return found


def outputs():
    """(what, JSON) for every command with --json over every real capture."""
    for scenario in SCENARIOS:
        for args in (("diff", "--json", "--around", "3"), ("parse", "--json"), ("gates", "--json")):
            code, out, _ = run_cli(*args, scenario)
            assert code in (0, 1, 2)
            yield f"{' '.join(args)} {scenario.name}", json.loads(out)
    vllm = sorted((FIXTURES / "public" / "vllm_specdecode").iterdir())
    _, out, _ = run_cli("acceptance", "--json", *vllm)
    yield "acceptance --json public/vllm_specdecode", json.loads(out)
    code, out, _ = run_cli("diff", "--json", "--rank", "0", "--rank", "1", REAL / "extra-op-4rank")
    yield "diff --json --rank 0 --rank 1 extra-op-4rank", json.loads(out)


def test_every_json_key_is_documented_in_the_readme():
    documented = documented_keys()
    seen: dict[str, str] = {}
    for what, result in outputs():
        for key, path in keys_in(result).items():
            seen.setdefault(key, f"{what}: {path}")
    assert len(seen) > 120  # the walk reached the nested objects (root, window, wedge, gate, sessions, runs...)
    missing = {key: where for key, where in seen.items() if key not in documented}
    assert not missing, f"keys the README's JSON section does not document: {missing}"


def test_the_walk_catches_an_undocumented_key():
    result = {"root": {"ops": {"0": {"seq": 1, "brand_new_key": 2}}}, "counts_by_type": {"AllReduce": {"0": 1}}}
    assert set(keys_in(result)) == {"root", "ops", "seq", "brand_new_key", "counts_by_type"}
    assert "brand_new_key" not in documented_keys()


def _rank_maps(obj, path="$"):
    if isinstance(obj, dict):
        if obj and all(re.fullmatch(r"\d+", k) for k in obj):
            yield path, [int(k) for k in obj]
        for key, value in obj.items():
            yield from _rank_maps(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for value in obj:
            yield from _rank_maps(value, f"{path}[]")


@pytest.mark.parametrize("scenario", ["extra-op-4rank", "long-window"])
def test_per_rank_maps_are_in_rank_order_whatever_the_argument_order(scenario):
    files = sorted((REAL / scenario).iterdir(), reverse=True)  # rank 3's files first
    _, out, _ = run_cli("diff", "--json", "--around", "2", *files)
    result = json.loads(out)
    maps = list(_rank_maps(result))
    assert len(maps) > 10 and any(len(ranks) == 4 for _, ranks in maps)
    for path, ranks in maps:
        assert ranks == sorted(ranks), path
    for split in result["checksum_splits"]:
        ranks = [int(re.search(r"rank(\d)", e).group(1)) for e in split["evidence"]]
        assert ranks == sorted(ranks)
