-- Every API token expires. Tokens made before this change get the default lifetime from now,
-- so no one is locked out by the upgrade itself.
ALTER TABLE api_tokens ADD COLUMN expires_at TIMESTAMPTZ;
UPDATE api_tokens SET expires_at = now() + interval '90 days';
ALTER TABLE api_tokens ALTER COLUMN expires_at SET NOT NULL;
-- Listing a user's tokens.
CREATE INDEX api_tokens_user_id ON api_tokens (user_id);
