"""The fallback breaker: turns the passthrough-fallback flag off when fallbacks surge.

A CloudWatch alarm (`FallbackSurge`) invokes `fallback_breaker.handler.handler`.
"""
