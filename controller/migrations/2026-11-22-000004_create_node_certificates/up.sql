-- Certificates issued to agents. Kept by node name (not a foreign key) so that the revocation
-- outlives the node row.
CREATE TABLE node_certificates (
    id BIGSERIAL PRIMARY KEY,
    node_name TEXT NOT NULL,
    -- SHA-256 of the certificate's DER, lowercase hex: the pin the controller checks.
    fingerprint TEXT NOT NULL UNIQUE,
    certificate_pem TEXT NOT NULL,
    not_after TIMESTAMPTZ NOT NULL,
    issued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ
);
CREATE INDEX node_certificates_node_name ON node_certificates (node_name);
