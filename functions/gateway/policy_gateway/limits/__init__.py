"""Spend and rate limits per caller (issue 42): what the document allows each caller, what a
call costs, and the counts every environment shares through leases (docs/limits.md).

config.py (the document's `limits`, `prices`, `limits_on_error`), prices.py (the shipped
price table), estimate.py (what a call is admitted at), windows.py (the windows a count
lives in), store.py (where counts are shared), ledger.py (one environment's leases),
admission.py (one call's state), limiter.py (admission before sending and reconciliation
after), headers.py (the `anthropic-ratelimit-*` headers and the 429), report.py (what
`policy-gateway usage` reads).
"""
