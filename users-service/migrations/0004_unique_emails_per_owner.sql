-- An email is unique within its owner ("owner": "all"): a 409 for another owner's address would tell
-- a caller that it exists. `owner_key` is the owner, or '' for rows without one (no subject is
-- empty): NULLs never collide in a unique index, and rows without an owner share one. `?email=`
-- keeps an index of its own, which reads its few rows in id order.
ALTER TABLE users
  ADD COLUMN owner_key VARBINARY(1020) AS (IFNULL(owner, '')) STORED AFTER owner,
  DROP INDEX uq_users_email,
  ADD UNIQUE KEY uq_users_email (owner_key, email_lower),
  ADD KEY ix_users_email (email_lower);
