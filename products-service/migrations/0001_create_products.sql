-- Products. `id` is a UUIDv7 in 16 bytes (creation-ordered: keyset pages walk the primary key).
-- The price is an exact DECIMAL below 10^10 with 2 fraction digits, plus its ISO 4217 currency.
CREATE TABLE products (
  id BINARY(16) NOT NULL,
  sku VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  name VARCHAR(200) NOT NULL,
  description TEXT NOT NULL,
  price_amount DECIMAL(12, 2) NOT NULL,
  price_currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  stock INT NOT NULL,
  version INT UNSIGNED NOT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_products_sku (sku)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
