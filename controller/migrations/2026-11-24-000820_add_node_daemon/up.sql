-- The daemon each node's agent drives (lxd or incus), reported with its version in the inventory:
-- a lab can mix LXD and Incus nodes under one controller.
ALTER TABLE nodes ADD COLUMN daemon TEXT;
