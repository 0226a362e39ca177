DROP INDEX operation_items_unfinished_instance;
ALTER TABLE operations DROP COLUMN claim_token;
