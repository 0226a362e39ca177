-- Where a home volume kept without its container is (issue #46): a teardown that kept homes, a
-- student removed without --delete-home. The next container of that name (a re-provision, a
-- queued one placed later) is placed on this node, so it gets its home back instead of a new,
-- empty one on another node. Gone with its node or course, and when the home is deleted or used
-- again.
CREATE TABLE kept_homes (
    instance_name TEXT PRIMARY KEY,
    node_id BIGINT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    course_id BIGINT REFERENCES courses (id) ON DELETE CASCADE,
    kept_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX kept_homes_node ON kept_homes (node_id);
CREATE INDEX kept_homes_course ON kept_homes (course_id);
