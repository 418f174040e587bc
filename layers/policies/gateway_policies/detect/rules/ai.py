"""AI model providers' API keys (Anthropic's is a core kind)."""

from __future__ import annotations

from ..rule import Rule
from ..shapes import hex_run, labelled, token

_KEY_LABEL_TAIL = r"_?api_?key"

RULES: tuple[Rule, ...] = (
    # Every OpenAI key (user, project, service account, admin) carries "T3BlbkFJ", base64 of
    # "OpenAI", between two random runs.
    token(
        "openai_api_key",
        r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,160}T3BlbkFJ[A-Za-z0-9_-]{20,160}",
        3 + 8 + 160 + 8 + 160,
        ("t3blbkfj",),
    ),
    token("openrouter_api_key", r"sk-or-v1-" + hex_run(64), 9 + 64, ("sk-or-v1-",)),
    token("huggingface_token", r"hf_[A-Za-z]{34}", 37, ("hf_",)),
    token("huggingface_org_token", r"api_org_[A-Za-z]{34}", 42, ("api_org_",)),
    token("replicate_api_token", r"r8_[A-Za-z0-9]{37}", 40, ("r8_",)),
    token("groq_api_key", r"gsk_[A-Za-z0-9]{52}", 56, ("gsk_",)),
    token("perplexity_api_key", r"pplx-[A-Za-z0-9]{48}", 53, ("pplx-",)),
    token("xai_api_key", r"xai-[A-Za-z0-9]{80}", 84, ("xai-",)),
    token(
        "langsmith_api_key", r"lsv2_(?:pt|sk)_" + hex_run(32) + "_" + hex_run(10), 51, ("lsv2_",)
    ),
    token("langfuse_secret_key", r"sk-lf-[a-f0-9-]{36}", 42, ("sk-lf-",)),
    token("elevenlabs_api_key", r"sk_" + hex_run(48), 51, ("sk_",)),
    # Unprefixed keys: only where a label names the provider.
    labelled(
        "cohere_api_key", "(?:co_?|cohere)" + _KEY_LABEL_TAIL, 16, "[a-z0-9]{40}", 40, ("co",)
    ),
    labelled("mistral_api_key", "mistral" + _KEY_LABEL_TAIL, 15, "[a-z0-9]{32}", 32, ("mistral",)),
    labelled("wandb_api_key", "wandb" + _KEY_LABEL_TAIL, 13, hex_run(40), 40, ("wandb",)),
)
