DROP TABLE student_budgets;
DROP TABLE course_budgets;
