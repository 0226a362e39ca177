-- An instance's description as LXD keeps one (issue #46: pylxd and lxc set it at creation and
-- read it back); NULL when none was given. Bounded like every other text a caller sets.
ALTER TABLE instances ADD COLUMN description TEXT CHECK (length(description) <= 1024);
