"""The judge core: one way for every policy that asks a model whether a block may pass.

A judging policy (rules_judge, tool_call_judge, flow_guard's escalation, a
custom one) holds one `core.Judge`, built in its `setup` from its options
(`options.JudgeOptions`, which its own options type extends) and its rules.
Per call it hands the judge a `prompt.Judged` (the block, as data) and the
call's `PolicyContext`, and gets back a `core.Outcome`: the `verdict.Verdict`
the model gave, or the judge error and what `on_error` makes of it. The core
owns everything else, so every judging policy behaves alike:

- the request (`prompt`): the rules in the system prompt; the block, its
  context (`context: "task"`: the user's own words, `task`) and any evidence
  in the user turn, inside a delimiter carrying a random nonce per call, with
  `<` and `>` escaped so the content can neither contain nor close it;
- the verdict (`verdict`): only from a forced call of the tool named
  `verdict` (`tool_choice: {"type": "tool", "name": "verdict"}`), whose input
  schema DESIGN.md fixes; anything else is a judge error (`errors.JudgeError`);
- the bounds (`core`): at most `max_concurrent` judge calls in flight per
  answer, at most `max_judged_blocks` judged per answer (past it a block is a
  judge error: a hostile upstream cannot buy a thousand judge calls), a
  per-call deadline within the Lambda's remaining time, and a verdict memo per
  policy instance and caller (`memo`), so a block already judged is not judged
  again;
- the record: each verdict in `policy_actions` (action `judge`), each judge
  call in `PolicyContext.judge_calls` (`record.JudgeCall`: the gateway sums
  them into the call line's `judge_usage` and counts JudgeCalls, JudgeErrors
  and JudgeLatency by policy), one span per judge call under the call's span
  (`PolicyContext.start_span`, given by the gateway).

A provider carries a request to a model and brings back the Messages API's
answer as JSON (`provider.JudgeProvider`): `anthropic` (the Messages API over
httpx2: the SDK costs a second to import) and `bedrock`. A new provider is a
subclass of `JudgeProvider` named in `providers.PROVIDERS` (`name:
"module:Class"`, imported on first use); it translates its own failures into
`JudgeError` and never sees anything but the built `JudgeRequest`.

A new judging policy: extend `JudgeOptions` with the policy's own options,
build `Judge(self, self.options, rules)` in `setup`, call `judge.note_request`
from `on_request` when `context` may be `task`, and `await judge.decide(...)`
per block. Blocks of one answer may be decided concurrently: the core bounds them.

Nothing here imports the gateway; everything the gateway offers arrives on
the `PolicyContext`. This package's `__init__` imports nothing, so
`gateway_policies.base` can name `record.JudgeCall` at no cost.
"""
