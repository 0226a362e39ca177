-- A certificate trusted for the LXD-style API is trusted for a while (COHORT_LXD_TRUST_DAYS),
-- like an API token, not for ever; those trusted before this change get a year from now.
ALTER TABLE lxd_certificates
    ADD COLUMN expires_at TIMESTAMPTZ NOT NULL DEFAULT now() + interval '365 days';
ALTER TABLE lxd_certificates ALTER COLUMN expires_at DROP DEFAULT;
