-- Each product's owner: the verified subject that created it. A catalogue ("owner": "none" in
-- services.json) does not restrict by it, but every resource keeps it, so that a service can change
-- its ownership without a migration. Rows from before have none.
ALTER TABLE products
  ADD COLUMN owner VARCHAR(255) NULL AFTER id,
  ADD INDEX ix_products_owner (owner, id);
