DROP TABLE ssh_keys;
DROP TABLE api_tokens;
DROP TABLE users;
