-- The host names and addresses the admin gave at `node add`: with the node name, the only names
-- the node's certificate carries (whatever the agent asks for), and the agent URL must use one.
ALTER TABLE join_tokens ADD COLUMN addresses TEXT[] NOT NULL DEFAULT '{}';
