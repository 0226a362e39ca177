ALTER TABLE lxd_certificates DROP COLUMN expires_at;
