-- The size of each student's home volume (the custom volume mounted at /home/<user>), in MiB:
-- LXD's `size` of the volume, a quota on the node's pool. NULL: the controller's default
-- (`COHORT_DEFAULT_HOME_GIB`).
ALTER TABLE courses ADD COLUMN home_mib INTEGER CHECK (home_mib BETWEEN 32 AND 16777216);
