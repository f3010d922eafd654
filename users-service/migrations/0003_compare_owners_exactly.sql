-- An owner is a subject, compared byte for byte: a VARCHAR compares with PAD SPACE (so 'alice ' was
-- alice), and a collation may fold case or Unicode forms. VARBINARY does neither, in MySQL 8 and
-- MariaDB alike; it holds the subject's UTF-8 bytes (1020: 255 characters of up to 4 bytes). The
-- index (owner, id) stays.
ALTER TABLE users MODIFY owner VARBINARY(1020) NULL;
