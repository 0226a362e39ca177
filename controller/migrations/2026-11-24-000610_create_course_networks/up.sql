-- Per course network policy; no row = egress open, SSH from anywhere. The agent enforces it
-- (its nftables table) on each of the course's containers.
CREATE TABLE course_networks (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    -- open: anywhere through the node's NAT; none: nowhere; allow: only egress_allow.
    egress TEXT NOT NULL DEFAULT 'open' CHECK (egress IN ('open', 'none', 'allow')),
    -- CIDR or CIDR:PORT entries, for egress = 'allow' only.
    egress_allow TEXT[] NOT NULL DEFAULT '{}'
        CHECK ((egress = 'allow') = (cardinality(egress_allow) > 0)),
    -- CIDRs whose clients may reach the students' SSH; empty: anywhere.
    ssh_from TEXT[] NOT NULL DEFAULT '{}',
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
