"""The detector: rules for secrets and personal data, validators, pattern shapes."""
