DROP TABLE lxd_certificates;
DROP TABLE lxd_trust_tokens;
