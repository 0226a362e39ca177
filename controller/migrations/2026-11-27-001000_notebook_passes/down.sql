DROP TABLE notebook_passes;
