-- Idempotency-Key on POST and PATCH. A row is one key: while `response_status` is NULL, a request
-- holding `token` is in flight (until `locked_until`, after which another may take the key over);
-- then the response, stored in the same transaction as the write it describes, is replayed to
-- every retry with the same request (`fingerprint`) until `expires_at`.
-- `scope` is the SHA-256 of the resource collection and the authenticated subject, if any.
CREATE TABLE idempotency_keys (
  scope BINARY(32) NOT NULL,
  idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  fingerprint BINARY(32) NOT NULL,
  token BINARY(16) NOT NULL,
  locked_until DATETIME(3) NOT NULL,
  expires_at DATETIME(3) NOT NULL,
  response_status SMALLINT UNSIGNED NULL,
  response_headers TEXT NULL,
  response_body MEDIUMTEXT NULL,
  PRIMARY KEY (scope, idempotency_key),
  KEY ix_idempotency_keys_expires_at (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
