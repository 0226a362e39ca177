DROP TRIGGER inventory_write ON course_staff;
DROP TABLE course_staff;
