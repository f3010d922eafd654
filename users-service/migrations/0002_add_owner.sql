-- Each user record's owner: the verified subject that created it (services.json: "owner": "all",
-- so only its owner sees it). Rows from before have none: only a users:admin caller sees them.
-- Indexed with the id, so that one owner's page is a range of the index in id order.
ALTER TABLE users
  ADD COLUMN owner VARCHAR(255) NULL AFTER id,
  ADD INDEX ix_users_owner (owner, id);
