-- The last request the portal relayed to an instance's JupyterLab: the reclaimer counts notebook
-- use like GPU use.
ALTER TABLE instance_usage ADD COLUMN notebook_active_at TIMESTAMPTZ;
-- Images that run JupyterLab for their student (images/jupyter): the portal offers "Open
-- JupyterLab" for containers made from them.
ALTER TABLE images ADD COLUMN jupyter BOOLEAN NOT NULL DEFAULT false;
