-- The public half of the SSH host key the agent wrote into the container before its first boot,
-- so students can be handed a known_hosts line instead of trusting the host on first login.
ALTER TABLE instances ADD COLUMN ssh_host_key text;
