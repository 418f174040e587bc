"""The example policy's own tests: `make test-policy POLICY=examples/policies` runs them
(docs/policies.md: Testing it)."""

import pytest
from gateway_policies import PolicyConfigError, load_chain
from gateway_policies.testing import context, run_request
from ticket_tagger import TicketTagger


def _request(text: str) -> dict[str, object]:
    return {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": text}]}


def test_the_tickets_named_reach_the_system_prompt() -> None:
    out = run_request(TicketTagger({"projects": ["OPS", "SEC"]}), _request("SEC-2 and OPS-7"))
    assert out["system"] == "This conversation concerns ticket(s) OPS-7, SEC-2."


def test_a_conversation_without_tickets_is_unchanged_and_nothing_is_recorded() -> None:
    ctx = context()
    request = _request("no tickets here")
    assert run_request(TicketTagger({"projects": ["OPS"]}), request, ctx=ctx) == request
    assert ctx.actions == []


def test_the_chain_refuses_it_without_projects() -> None:
    with pytest.raises(PolicyConfigError, match="projects"):
        load_chain({"policies": [{"policy": "ticket_tagger:TicketTagger", "options": {}}]})
