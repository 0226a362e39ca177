ALTER TABLE instances DROP COLUMN ssh_host_key;
