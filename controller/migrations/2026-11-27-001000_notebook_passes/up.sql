-- What lets a browser into one container's JupyterLab on the notebook's own origin: a one-use
-- ticket the portal puts in a redirect (a minute long), and the pass a ticket is traded for,
-- kept in that origin's cookie. Both hold only the SHA-256 of their secret, belong to one
-- container and one portal session, and end with that session (sign-out, a password change).
CREATE TABLE notebook_passes (
    secret_hash BYTEA PRIMARY KEY,
    ticket BOOLEAN NOT NULL,
    session_id BIGINT NOT NULL REFERENCES portal_sessions (id) ON DELETE CASCADE,
    instance_id BIGINT NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX notebook_passes_session ON notebook_passes (session_id);
CREATE INDEX notebook_passes_instance ON notebook_passes (instance_id);
