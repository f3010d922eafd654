-- What one caller (a scope) may make the store keep: `response_bytes` is what a key's stored
-- response counts against its scope's budget (0 while in flight), and the index finds a scope's
-- keys newest first, the order in which they are kept.
ALTER TABLE idempotency_keys
  ADD COLUMN response_bytes INT UNSIGNED NOT NULL DEFAULT 0,
  ADD KEY ix_idempotency_keys_scope_age (scope, expires_at);
