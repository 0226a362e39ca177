-- A node that goes offline keeps, here, the state an admin gave it (`cordoned`, `evacuating`)
-- or `online`; when it answers again it goes back to that state instead of `online`, so a
-- cordon or an evacuation outlives an outage and the node takes no placement without a restore.
ALTER TABLE nodes ADD COLUMN state_before_offline TEXT
    CHECK (state_before_offline IN ('online', 'cordoned', 'evacuating'));
