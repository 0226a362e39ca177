DROP TABLE gpu_allocations;
