-- Whether the course's instructors may open its students' JupyterLab through the portal.
ALTER TABLE courses ADD COLUMN jupyter_instructors BOOLEAN NOT NULL DEFAULT false;
