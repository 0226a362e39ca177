DROP INDEX api_tokens_user_id;
ALTER TABLE api_tokens DROP COLUMN expires_at;
