-- A course's staff: other instructors and teaching assistants who hold its instructor's rights
-- (all but deleting the course and its quota, which stay with its instructor and admins). An
-- account or a course deleted takes its rows with it.
CREATE TABLE course_staff (
    course_id BIGINT NOT NULL REFERENCES courses (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (course_id, user_id)
);
CREATE INDEX course_staff_user ON course_staff (user_id);

-- Staff see their courses' instances in a page of instances: a change of staff is a change
-- of what a kept page shows (see 2026-11-23-000110_inventory_writes).
CREATE TRIGGER inventory_write AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON course_staff
    FOR EACH STATEMENT EXECUTE FUNCTION cohort_note_inventory_write();
