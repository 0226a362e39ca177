ALTER TABLE courses DROP COLUMN jupyter_instructors;
