-- The template catalog: tarballs stored on the controller's disk under their fingerprint.
CREATE TABLE images (
    id BIGSERIAL PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    alias TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    gpu_ready BOOLEAN NOT NULL DEFAULT false,
    size_bytes BIGINT NOT NULL,
    created_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Which nodes' LXD hold which image (from the inventory, or after an import there).
CREATE TABLE node_images (
    node_id BIGINT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    image_id BIGINT NOT NULL REFERENCES images (id) ON DELETE CASCADE,
    PRIMARY KEY (node_id, image_id)
);
