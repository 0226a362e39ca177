-- The course whose roster created the account, and when the person first set credentials of
-- their own (an SSH key): together they decide whether that course's instructor may issue the
-- account a new generated password (only to an account their roster made and whose owner never
-- set their own).
ALTER TABLE users ADD COLUMN roster_course_id BIGINT REFERENCES courses (id) ON DELETE SET NULL;
ALTER TABLE users ADD COLUMN own_credentials_at TIMESTAMPTZ;
-- A generated password was only ever given by a roster to an account without a key or password.
UPDATE users u SET roster_course_id = e.course_id
  FROM enrollments e
 WHERE e.user_id = u.id AND e.initial_password IS NOT NULL AND u.role = 'student';
-- From now on `enrollments.initial_password` holds a generated password only until the first
-- export that shows it; `users.password_hash` keeps its crypt(3) hash.
