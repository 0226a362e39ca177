-- GPU budgets (issue 43): a course's GPU hours per student and period, counted on allocated
-- GPU-seconds (gpu_usage_hours). No row = no budget.
CREATE TABLE course_budgets (
    course_id BIGINT PRIMARY KEY REFERENCES courses (id) ON DELETE CASCADE,
    gpu_hours_per_student DOUBLE PRECISION NOT NULL
        CHECK (gpu_hours_per_student > 0 AND gpu_hours_per_student <= 10000),
    budget_period TEXT NOT NULL CHECK (budget_period IN ('week', 'month', 'course'))
);

-- One student's budget in one period: the hours granted on top (by the course's instructor or
-- an admin; each grant is in the audit log) and when they were told of the 80 % mark, at which
-- limit (a grant raises it, so a later 80 % is told again). Kept in the database so a
-- controller restart neither tells twice nor forgets to tell.
CREATE TABLE student_budgets (
    course_id BIGINT NOT NULL REFERENCES courses (id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    period_start TIMESTAMPTZ NOT NULL,
    granted_hours DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (granted_hours >= 0),
    warned_at TIMESTAMPTZ,
    warned_limit_hours DOUBLE PRECISION,
    PRIMARY KEY (course_id, user_id, period_start)
);
CREATE INDEX student_budgets_user ON student_budgets (user_id);
