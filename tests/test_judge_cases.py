"""The labelled case sets `policy-gateway judge eval` ships (examples/judge/), and their reader."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from policy_gateway.cli.judge_cases import CaseError, read_cases

from bench import escalation_cases

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).parent.parent / "examples" / "judge"
PRESETS = (
    "dangerous_commands",
    "sensitive_file_writes",
    "network_egress",
    "package_manager",
    "test_weakening",
)


def test_the_preset_set_labels_true_cases_and_near_misses_of_every_preset() -> None:
    cases = read_cases(EXAMPLES / "presets.jsonl")
    assert len(cases) >= 60
    chain = json.loads((EXAMPLES / "presets-chain.json").read_text())
    entries = [(e["policy"], e["options"]) for e in chain["policies"]]
    for case in cases:
        # Each case is for exactly one policy of the shipped chain.
        assert sum(case.targets(name, options) for name, options in entries) == 1, case.id
    verdicts = {
        preset: Counter(v for c in cases if c.target["preset"] == preset for v in c.expected)
        for preset in PRESETS
    }
    for preset, counted in verdicts.items():
        assert counted["block"] >= 5, preset
        assert counted["allow"] >= 5, preset
    by_id = {case.id: case for case in cases}
    # The issue's own pairs: the same act, once harmful and once not.
    assert by_id["dangerous_commands/rm-home"].expected == ["block"]
    assert by_id["dangerous_commands/rm-build"].expected == ["allow"]
    assert by_id["test_weakening/loosen-assert"].expected == ["block"]
    assert by_id["test_weakening/rename-test"].expected == ["allow"]


def test_the_escalation_set_is_figure_15s_flagged_sink_calls_as_the_generator_makes_them(
    tmp_path: Path,
) -> None:
    fresh = tmp_path / "escalation.jsonl.gz"
    assert escalation_cases.main([str(fresh)]) == 0
    shipped = EXAMPLES / "escalation.jsonl.gz"
    assert gzip.decompress(fresh.read_bytes()) == gzip.decompress(shipped.read_bytes())
    cases = read_cases(shipped)
    kinds = Counter(case.note for case in cases)
    # Figure (15) (docs/performance.md): 200 + 119 + 144 + 105 attacks stopped, and of
    # the 100 benign sink calls 67 pass and 33 are blocked.
    assert kinds == {"attack": 568, "benign_flagged": 33, "benign": 67}
    for case in cases:
        flagged = case.note != "benign"
        assert case.escalated == [flagged]
        assert case.expected == ["block" if case.note == "attack" else "allow"]
    chain = json.loads((EXAMPLES / "escalation-chain.json").read_text())
    (entry,) = chain["policies"]
    assert entry["options"] == {**escalation_cases.guard_options(), "on_taint": "judge"}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[]", "line 1: a case is a JSON object"),
        ("{", "line 1: not JSON"),
        ('{"id": "a", "conversation": {}, "answer": {"content": []}, "expected": []}', "messages"),
        (
            '{"id": "a", "conversation": {"messages": []}, "answer": {"content": [{}]}, '
            '"expected": []}',
            "one verdict per answer block",
        ),
        (
            '{"id": "a", "conversation": {"messages": []}, "answer": {"content": [{}]}, '
            '"expected": ["deny"]}',
            "'deny' is not one of allow, block, replace",
        ),
        (
            '{"id": "a", "conversation": {"messages": []}, "answer": {"content": [{}]}, '
            '"expected": ["allow"], "escalated": ["yes"]}',
            "escalated must hold",
        ),
    ],
)
def test_a_case_the_eval_cannot_use_is_refused_with_its_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(CaseError, match="line 1") as raised:
        read_cases(path)
    assert problem in str(raised.value)


def test_two_cases_with_one_id_and_an_empty_file_are_refused(tmp_path: Path) -> None:
    case = '{"id": "a", "conversation": {"messages": []}, "answer": {"content": []}, '
    case += '"expected": []}'
    path = tmp_path / "cases.jsonl"
    path.write_text(f"{case}\n\n{case}\n")
    with pytest.raises(CaseError, match="line 3: a: a second case with this id"):
        read_cases(path)
    path.write_text("\n")
    with pytest.raises(CaseError, match="holds no case"):
        read_cases(path)
    with pytest.raises(CaseError, match="cannot read"):
        read_cases(tmp_path / "missing.jsonl")
