"""Training and evaluation: config (dataclasses), trainer (teacher forcing), evaluate (rollout,
nRMSE, gate), checkpoint (atomic, weights_only-loadable)."""
