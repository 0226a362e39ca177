-- A join token is spent by `UPDATE ... SET used_at = now() WHERE used_at IS NULL RETURNING`,
-- so two agents racing for one token cannot both win.
CREATE TABLE join_tokens (
    id BIGSERIAL PRIMARY KEY,
    node_name TEXT NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE,
    created_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
