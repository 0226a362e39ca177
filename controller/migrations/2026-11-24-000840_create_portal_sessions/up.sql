-- The portal's own sign-in password (argon2id), apart from `users.password_hash`, which is the
-- crypt(3) hash handed to containers' /etc/shadow.
CREATE TABLE sign_in_passwords (
    user_id BIGINT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    hash TEXT NOT NULL CHECK (hash LIKE '$argon2id$%'),
    changed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Browser sessions: only the SHA-256 of the cookie's secret is kept, like API tokens.
CREATE TABLE portal_sessions (
    id BIGSERIAL PRIMARY KEY,
    secret_hash BYTEA NOT NULL UNIQUE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX portal_sessions_user_id ON portal_sessions (user_id);
CREATE INDEX portal_sessions_expires_at ON portal_sessions (expires_at);
