-- Most processes in each student's container (LXD's `limits.processes`, a pids cgroup limit),
-- so a fork bomb stays inside its container. NULL: the controller's default.
ALTER TABLE courses ADD COLUMN processes INTEGER CHECK (processes BETWEEN 64 AND 1000000);
