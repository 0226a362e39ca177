-- A course's snapshot schedule for its students' homes (issue #45): how often the daemon
-- snapshots each home volume and how many of those snapshots it keeps. No row = off.
CREATE TABLE course_home_snapshots (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    every TEXT NOT NULL CHECK (every IN ('daily', 'hourly')),
    keep INTEGER NOT NULL CHECK (keep BETWEEN 1 AND 100)
);
