-- A student without an SSH key gets a generated password, shown to the instructor in the
-- endpoints export and nowhere else; the container only ever sees its crypt(3) hash.
ALTER TABLE enrollments ADD COLUMN initial_password TEXT;
