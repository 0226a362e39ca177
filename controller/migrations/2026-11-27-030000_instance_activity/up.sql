-- What the reclaimer last learnt from a container's node about its use, besides the GPU and
-- JupyterLab (instance_usage): the last input on its terminals (SSH sessions) and the last time
-- one of its processes was above the CPU threshold, with that process. Times are the database's
-- clock: the node reports ages, the controller places them.
CREATE TABLE instance_activity (
    instance_id BIGINT PRIMARY KEY REFERENCES instances (id) ON DELETE CASCADE,
    tty_input_at TIMESTAMPTZ,
    cpu_busy_at TIMESTAMPTZ,
    busy_process TEXT,
    checked_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
