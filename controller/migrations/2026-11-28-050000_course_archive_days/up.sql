-- Days a course's archived homes are kept (issue #45), chosen per course; NULL (the courses
-- made before) follows the controller's COHORT_ARCHIVE_DAYS.
ALTER TABLE courses ADD COLUMN archive_days INTEGER CHECK (archive_days BETWEEN 1 AND 3650);
