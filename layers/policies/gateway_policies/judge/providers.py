"""The judge providers by name: the `provider` option's values, and the class each names.

A new provider adds its line here (`name: "module:Class"`, a JudgeProvider
subclass); it is imported only when a chain names it.
"""

PROVIDERS: dict[str, str] = {
    "anthropic": "gateway_policies.judge.anthropic:AnthropicProvider",
    "bedrock": "gateway_policies.judge.bedrock:BedrockProvider",
}
