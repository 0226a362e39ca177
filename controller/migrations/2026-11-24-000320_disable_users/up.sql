-- An admin disables an account: its tokens are refused and its SSH logins removed, its
-- containers and data stay. NULL: enabled.
ALTER TABLE users ADD COLUMN disabled_at TIMESTAMPTZ;
