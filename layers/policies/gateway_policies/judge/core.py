"""The `Judge` a judging policy holds: asks the model about one block, bounded and recorded.

See this package's docstring for how a policy uses it. Per answer (one
`PolicyContext`) it keeps a semaphore of `max_concurrent` and the count of
blocks sent (`max_judged_blocks`); per policy instance, a verdict memo.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import recorder
from ..actions import JUDGE
from .errors import OVER_BUDGET, TIMEOUT, TRANSPORT, JudgeError
from .memo import VerdictMemo, key
from .prompt import Judged, build_request, data
from .provider import JudgeProvider, provider_for, usage_of
from .record import JudgeCall
from .task import task_context
from .verdict import ALLOW, BLOCK, Verdict, read_verdict

if TYPE_CHECKING:
    from ..base import Policy, PolicyContext
    from .options import JudgeOptions

log = logging.getLogger("gateway_policies.judge")

DEADLINE_RESERVE_SECONDS = 0.5
"""Of the Lambda's remaining time, what a judge call leaves for answering the client."""
ERROR = "error"
"""The recorded verdict of a block the judge gave none for."""
SPAN_NAME = "judge"


@dataclass(frozen=True)
class Outcome:
    """What became of one judged block: the judge's verdict, or the error and `on_error`'s
    decision. `decision` is what the policy acts on: allow, block or replace."""

    verdict: Verdict | None
    error: JudgeError | None = None
    on_error: str = BLOCK
    cached: bool = False
    latency_ms: float = 0.0

    @property
    def decision(self) -> str:
        if self.verdict is not None:
            return self.verdict.decision
        return self.on_error

    @property
    def unjudged(self) -> bool:
        """True when the block passes without a verdict (a judge error, `on_error: allow`)."""
        return self.verdict is None and self.on_error == ALLOW

    def reason(self) -> str:
        """Why, for the client: the judge's reason, or what went wrong (never content)."""
        if self.verdict is not None:
            rule = f" (rule: {self.verdict.rule})" if self.verdict.rule else ""
            return f"{self.verdict.reason}{rule}".strip()
        kind = self.error.kind if self.error is not None else "error"
        if self.on_error == ALLOW:
            return f"the judge could not assess it ({kind}), so it was not judged"
        return f"the judge could not assess it ({kind}), so it was blocked (fail-secure)"


@dataclass
class _AnswerState:
    """One answer's bounds: judge calls in flight, and blocks sent so far."""

    semaphore: asyncio.Semaphore | None = None
    sent: int = 0
    task: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


class Judge:
    """Asks a model about blocks for one policy instance (build it in the policy's `setup`).

    `rules` go in the system prompt; `threshold` adds tool_call_judge's `risk`
    field to the verdict tool, and a verdict rating the risk at or above it
    blocks whatever its decision said (the stricter of the two).
    """

    def __init__(
        self,
        policy: Policy[Any],
        options: JudgeOptions,
        rules: str,
        *,
        threshold: float | None = None,
    ) -> None:
        self.policy = policy
        self.options = options
        self.rules = rules
        self.risk = threshold is not None
        self.threshold = threshold
        self.memo = VerdictMemo(options.memo_bytes)
        self.notes_key = object()
        """What a judging policy keys the notes it owes per call by (judge.gate)."""
        self._provider: JudgeProvider | None = None

    @property
    def provider(self) -> JudgeProvider:
        # Built on first use: the provider's imports stay off a chain load that never judges.
        if self._provider is None:
            self._provider = provider_for(self.options)
        return self._provider

    async def aclose(self) -> None:
        """Close the provider's connections, if it was ever built (JudgeProvider.aclose)."""
        if self._provider is not None:
            await self._provider.aclose()

    def _state(self, ctx: PolicyContext) -> _AnswerState:
        state = ctx.state(self, _AnswerState)
        if state.semaphore is None:
            state.semaphore = asyncio.Semaphore(self.options.max_concurrent)
        return state

    def note_request(self, request: dict[str, Any], ctx: PolicyContext) -> None:
        """Keep what `context: "task"` sends (the user's words) for this call's judge calls."""
        if self.options.context == "task":
            self._state(ctx).task = task_context(
                request, self.options.context_bytes, include_system=self.options.include_system
            )

    def _timeout(self, ctx: PolicyContext) -> float:
        if ctx.deadline is None:
            return self.options.timeout
        left = ctx.deadline - time.time() - DEADLINE_RESERVE_SECONDS
        return min(self.options.timeout, left)

    async def decide(self, judged: Judged, ctx: PolicyContext) -> Outcome:
        """The outcome for `judged`, recorded on `ctx` (policy_actions, judge_calls, a span)."""
        state = self._state(ctx)
        memo_key = key(
            ctx.caller,
            self.rules,
            self.options.model,
            self.risk,
            judged.decisions,
            data(judged, state.task),
        )
        remembered = self.memo.get(memo_key)
        if remembered is not None:
            return self._recorded(Outcome(remembered, cached=True), judged, ctx)
        if state.sent >= self.options.max_judged_blocks:
            error = JudgeError(OVER_BUDGET, "max_judged_blocks reached for this answer")
            return self._recorded(self._failed(error), judged, ctx)
        state.sent += 1
        assert state.semaphore is not None
        async with state.semaphore:
            outcome = await self._ask(judged, state.task, ctx)
        if outcome.verdict is not None:
            self.memo.put(memo_key, outcome.verdict)
        return self._recorded(outcome, judged, ctx)

    def _failed(self, error: JudgeError, latency_ms: float = 0.0) -> Outcome:
        return Outcome(None, error, self.options.on_error, latency_ms=latency_ms)

    async def _ask(self, judged: Judged, task: tuple[str, ...], ctx: PolicyContext) -> Outcome:
        request = build_request(
            self.rules,
            judged,
            model=self.options.model,
            max_tokens=self.options.max_tokens,
            task=task,
            risk=self.risk,
        )
        span = ctx.start_span(SPAN_NAME) if ctx.start_span is not None else None
        started = time.perf_counter()
        tokens = (0, 0)
        error: JudgeError | None = None
        verdict: Verdict | None = None
        try:
            timeout = self._timeout(ctx)
            if timeout <= 0:
                raise JudgeError(TIMEOUT, "no time left before the call's deadline")
            try:
                async with asyncio.timeout(timeout):
                    answer = await self.provider.send(request, ctx, timeout)
            except TimeoutError:
                raise JudgeError(TIMEOUT, f"no answer within {timeout:.3g} s") from None
            tokens = usage_of(answer)
            verdict = self._thresholded(read_verdict(answer, judged.decisions, risk=self.risk))
        except JudgeError as exc:
            error = exc
        except Exception as exc:
            # A provider's own bug must not pass a block unjudged: it is a judge error too.
            error = JudgeError(TRANSPORT, type(exc).__name__)
        latency_ms = round((time.perf_counter() - started) * 1000, 1)
        ctx.judge_calls.append(
            JudgeCall(
                policy=self.policy.label,
                provider=self.options.provider,
                model=self.options.model,
                latency_ms=latency_ms,
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                error=None if error is None else error.kind,
                shadow=ctx.shadow,
            )
        )
        if span is not None:
            span.describe("judge.policy", self.policy.label)
            span.describe("judge.provider", self.options.provider)
            span.describe("judge.model", self.options.model)
            span.describe("judge.decision", ERROR if verdict is None else verdict.decision)
            span.end(error)
        if error is not None:
            log.warning(
                "judge failed; the block is handled as on_error says",
                extra={
                    "call_id": ctx.call_id,
                    "policy": self.policy.label,
                    "block_kind": judged.kind,
                    "tool": None if judged.tool is None else recorder.text(judged.tool),
                    "error_type": error.kind,
                    "status": error.status,
                    "on_error": self.options.on_error,
                },
            )
            return self._failed(error, latency_ms)
        return Outcome(verdict, latency_ms=latency_ms)

    def _thresholded(self, verdict: Verdict) -> Verdict:
        risk = verdict.risk
        if self.threshold is None or risk is None or risk < self.threshold:
            return verdict
        return replace(verdict, decision=BLOCK)

    def _recorded(self, outcome: Outcome, judged: Judged, ctx: PolicyContext) -> Outcome:
        entry: dict[str, Any] = {"kind": judged.kind}
        if judged.tool is not None:
            entry["tool"] = judged.tool
        verdict = outcome.verdict
        entry["verdict"] = ERROR if verdict is None else verdict.decision
        if verdict is not None and verdict.rule:
            entry["rule"] = verdict.rule
        if verdict is not None and verdict.risk is not None:
            entry["risk"] = verdict.risk
        if outcome.error is not None:
            entry["error"] = outcome.error.kind
            entry["on_error"] = outcome.on_error
        if judged.evidence:
            # A block judged with evidence is one a policy escalated (flow_guard's tainted
            # sink calls): the record says so.
            entry["escalated"] = True
        entry["latency_ms"] = outcome.latency_ms
        entry["cached"] = outcome.cached
        ctx.record(self.policy, JUDGE, **entry)
        return outcome
