-- The LXD-style API's trust store: single-use tokens that `lxc remote add` redeems, and the client
-- certificates they admitted, each bound to the Cohort user whose roles apply to it.
CREATE TABLE lxd_trust_tokens (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    secret_hash BYTEA NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE lxd_certificates (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL UNIQUE,
    certificate TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
