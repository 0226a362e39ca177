ALTER TABLE instances DROP COLUMN description;
