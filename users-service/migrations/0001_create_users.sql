-- Users. `id` is a UUIDv7 in 16 bytes: ordered by creation time, so keyset pages walk the
-- primary key. Email uniqueness ignores case through a stored lower-case copy with a unique index.
CREATE TABLE users (
  id BINARY(16) NOT NULL,
  email VARCHAR(254) NOT NULL,
  email_lower VARCHAR(254) AS (LOWER(email)) STORED,
  name VARCHAR(200) NOT NULL,
  version INT UNSIGNED NOT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_users_email (email_lower)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
