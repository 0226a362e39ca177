DROP TABLE join_tokens;
