DROP TABLE operation_items;
DROP TABLE operations;
