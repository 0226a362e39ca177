DROP TABLE portal_sessions;
DROP TABLE sign_in_passwords;
